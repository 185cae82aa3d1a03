package lite

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
)

// Lite receipt handles carry everything an ack needs, authenticated:
//
//	"l1." + base64url(no padding) of:
//	version u8 (=1) | queue i32 | offset i64 | gen u32 | group hash u32 |
//	parent hash u32 | lite len u8 | lite | MAC (HMAC-SHA256, 16 bytes)
//
// offset is the message's parent queue offset, gen the delivery run it
// went out in. A handle names its lite topic, so acks need nothing else.
const (
	handlePrefix  = "l1."
	handleVersion = 1
	handleFixed   = 1 + 4 + 8 + 4 + 4 + 4 + 1
	handleMAC     = 16
)

var strictRawURL = base64.RawURLEncoding.Strict()

// ErrBadHandle is wrapped by every handle decode failure.
var ErrBadHandle = errors.New("lite receipt handle")

type handle struct {
	queue      int32
	offset     int64
	gen        uint32
	groupHash  uint32
	parentHash uint32
	lite       string
}

// IsHandle reports whether h looks like a lite receipt handle.
func IsHandle(h string) bool { return strings.HasPrefix(h, handlePrefix) }

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

type codec struct{ key []byte }

func newCodec(key []byte) *codec {
	// A key of its own, derived from the receipt-handle key, so a POP
	// handle's MAC never verifies as a lite one.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mqgate lite receipt handle"))
	return &codec{key: m.Sum(nil)}
}

func (c *codec) mac(b []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b)
	return m.Sum(nil)[:handleMAC]
}

func (c *codec) encode(h handle) string {
	b := make([]byte, 0, handleFixed+len(h.lite)+handleMAC)
	b = append(b, handleVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(h.queue))
	b = binary.BigEndian.AppendUint64(b, uint64(h.offset))
	b = binary.BigEndian.AppendUint32(b, h.gen)
	b = binary.BigEndian.AppendUint32(b, h.groupHash)
	b = binary.BigEndian.AppendUint32(b, h.parentHash)
	b = append(b, byte(len(h.lite)))
	b = append(b, h.lite...)
	b = append(b, c.mac(b)...)
	return handlePrefix + strictRawURL.EncodeToString(b)
}

func (c *codec) decode(s string) (handle, error) {
	var h handle
	rest, ok := strings.CutPrefix(s, handlePrefix)
	if !ok {
		return h, fmt.Errorf("%w: not a lite handle", ErrBadHandle)
	}
	if len(rest) > 4*(handleFixed+255+handleMAC)/3+4 {
		return h, fmt.Errorf("%w: too long", ErrBadHandle)
	}
	b, err := strictRawURL.DecodeString(rest)
	if err != nil {
		return h, fmt.Errorf("%w: not base64url", ErrBadHandle)
	}
	if len(b) < handleFixed+handleMAC || b[0] != handleVersion {
		return h, fmt.Errorf("%w: truncated or unknown version", ErrBadHandle)
	}
	n := int(b[handleFixed-1])
	if len(b) != handleFixed+n+handleMAC {
		return h, fmt.Errorf("%w: wrong length", ErrBadHandle)
	}
	body := b[:handleFixed+n]
	if !hmac.Equal(c.mac(body), b[handleFixed+n:]) {
		return h, fmt.Errorf("%w: not issued by this server", ErrBadHandle)
	}
	h.queue = int32(binary.BigEndian.Uint32(b[1:]))
	h.offset = int64(binary.BigEndian.Uint64(b[5:]))
	h.gen = binary.BigEndian.Uint32(b[13:])
	h.groupHash = binary.BigEndian.Uint32(b[17:])
	h.parentHash = binary.BigEndian.Uint32(b[21:])
	h.lite = string(b[handleFixed : handleFixed+n])
	return h, nil
}

// HandleQueue reads the parent queue a lite receipt handle names,
// without authenticating it (the group holding the queue does when the
// handle reaches it): where a listener of a cluster of several data
// groups sends an ack. ok is false for what is not a lite handle.
func HandleQueue(s string) (q int32, ok bool) {
	rest, ok := strings.CutPrefix(s, handlePrefix)
	if !ok || len(rest) > 4*(handleFixed+255+handleMAC)/3+4 {
		return 0, false
	}
	b, err := strictRawURL.DecodeString(rest)
	if err != nil || len(b) < handleFixed+handleMAC || b[0] != handleVersion {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b[1:])), true
}
