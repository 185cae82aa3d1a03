package connlimit

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
)

// The refusals a listener writes to a connection over its limits, before
// closing it. Each answers the client's first request (an answer that came
// before it would be taken for one to no request: Go's HTTP client drops
// it and fails the request), then half-closes the connection and reads
// what the client sends until it closes too (or the refusal's deadline
// passes): closing with unread bytes would reset the connection, and the
// client could lose the answer.

// maxRequestHead bounds what HTTPRefusal reads of a request before it
// answers.
const maxRequestHead = 16 << 10

// HTTPRefusal answers an HTTP/1.1 client's first request with status, a
// Retry-After of one second and the body body(why) of type contentType.
// It reads the request's head first (up to its blank line, at most
// maxRequestHead bytes).
func HTTPRefusal(status int, contentType string, body func(why string) []byte) func(net.Conn, string) {
	return func(c net.Conn, why string) {
		if !readRequestHead(bufio.NewReaderSize(c, 4096)) {
			return
		}
		b := body(why)
		head := "HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n" +
			"Content-Type: " + contentType + "\r\n" +
			"Content-Length: " + strconv.Itoa(len(b)) + "\r\n" +
			"Retry-After: 1\r\nConnection: close\r\n\r\n"
		if _, err := c.Write(append([]byte(head), b...)); err != nil {
			return
		}
		drain(c)
	}
}

// readRequestHead reads up to the blank line that ends an HTTP/1.1
// request's head; false when the connection ends or errs first. A head
// longer than maxRequestHead is answered anyway.
func readRequestHead(r *bufio.Reader) bool {
	n := 0
	for n < maxRequestHead {
		line, err := r.ReadSlice('\n')
		n += len(line)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return false
		}
		if len(line) <= 2 && (len(line) == 1 || line[0] == '\r') {
			return true
		}
	}
	return true
}

// HTTP/2 framing, as much as the refusal needs (RFC 9113).
const (
	h2Preface       = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	frameHeaders    = 0x1
	frameSettings   = 0x4
	frameGoAway     = 0x7
	flagEndStream   = 0x1
	flagEndHeaders  = 0x4
	enhanceYourCalm = 0xb
	maxFrameLen     = 16384 // SETTINGS_MAX_FRAME_SIZE's initial value: the refusal advertises no other
	maxFramesRead   = 16    // a client's first request comes after its SETTINGS and a WINDOW_UPDATE or two
)

// HTTP2Refusal answers a gRPC client speaking HTTP/2 in the clear: the
// server preface, then its first call is answered UNAVAILABLE with why as
// the message (the call fails with it: nothing was done), then a GOAWAY
// (ENHANCE_YOUR_CALM, why as debug data). A connection that starts with
// anything else (a TLS handshake) is closed.
func HTTP2Refusal() func(net.Conn, string) {
	return func(c net.Conn, why string) {
		br := bufio.NewReaderSize(c, 4096)
		var preface [len(h2Preface)]byte
		if _, err := io.ReadFull(br, preface[:]); err != nil || string(preface[:]) != h2Preface {
			return
		}
		if _, err := c.Write(appendFrame(nil, frameSettings, 0, 0, nil)); err != nil {
			return
		}
		stream, ok := firstStream(br)
		if !ok {
			return
		}
		if len(why) > 1024 {
			why = why[:1024]
		}
		out := appendFrame(nil, frameHeaders, flagEndStream|flagEndHeaders, stream, unavailableTrailers(why))
		goAway := binary.BigEndian.AppendUint32(nil, stream)
		goAway = binary.BigEndian.AppendUint32(goAway, enhanceYourCalm)
		out = appendFrame(out, frameGoAway, 0, 0, append(goAway, why...))
		if _, err := c.Write(out); err != nil {
			return
		}
		drain(c)
	}
}

// firstStream reads a client's frames after its preface until its first
// HEADERS frame, and returns that frame's stream: false for anything that
// is not HTTP/2 framing, and after maxFramesRead frames.
func firstStream(r io.Reader) (uint32, bool) {
	var h [9]byte
	for range maxFramesRead {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, false
		}
		n := int64(h[0])<<16 | int64(h[1])<<8 | int64(h[2])
		if n > maxFrameLen {
			return 0, false
		}
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return 0, false
		}
		stream := binary.BigEndian.Uint32(h[5:]) &^ (1 << 31)
		if h[3] == frameHeaders && stream != 0 && stream%2 == 1 {
			return stream, true
		}
	}
	return 0, false
}

// unavailableTrailers is the HPACK block of a trailers-only gRPC response
// with status UNAVAILABLE and message msg, every field a literal that
// leaves the decoder's table as it is.
func unavailableTrailers(msg string) []byte {
	b := []byte{0x88} // :status 200 (static table index 8)
	// content-type (static index 31, 4-bit prefix: 15 + 16): application/grpc
	b = append(b, 0x0f, 0x10)
	b = appendHPACKString(b, "application/grpc")
	for _, f := range [][2]string{{"grpc-status", "14"}, {"grpc-message", percentEncode(msg)}} {
		b = append(b, 0x00) // literal without indexing, new name
		b = appendHPACKString(b, f[0])
		b = appendHPACKString(b, f[1])
	}
	return b
}

// appendHPACKString appends s as an HPACK string literal (not Huffman
// coded): its length as a 7-bit-prefix integer, then its bytes.
func appendHPACKString(b []byte, s string) []byte {
	n := len(s)
	if n < 0x7f {
		b = append(b, byte(n))
	} else {
		b = append(b, 0x7f)
		for n -= 0x7f; n >= 0x80; n >>= 7 {
			b = append(b, byte(n&0x7f|0x80))
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// percentEncode encodes a grpc-message value: bytes outside printable
// ASCII, and '%', as %XX.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// appendFrame appends an HTTP/2 frame.
func appendFrame(b []byte, typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

// drain half-closes c and reads it until the client closes its side (or
// c's deadline passes).
func drain(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// JSONRefusal is a body function for HTTPRefusal: {"code": code, "name":
// name, "message": why}, the REST API's error shape.
func JSONRefusal(code int, name string) func(why string) []byte {
	return func(why string) []byte {
		b, _ := json.Marshal(struct {
			Code    int    `json:"code"`
			Name    string `json:"name"`
			Message string `json:"message"`
		}{code, name, why})
		return b
	}
}

// TextRefusal is a body function for HTTPRefusal: why and a newline.
func TextRefusal(why string) []byte { return []byte(why + "\n") }
