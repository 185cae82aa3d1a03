package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
)

// In cluster mode a follower's relay pipes each classic connection to the
// leader's remoting listener. The leader's routes and cluster info would
// then name the leader itself, so a client learns the leader's address
// and loses it with the leader, until its next route refresh (30 s in the
// classic clients). Instead the relay opens the piped connection with a
// greeting naming the address the client dialled (as this member would
// advertise it), and the leader names that address in what it answers on
// the connection: the client keeps talking to the member it chose, whose
// relay follows every change of leader.
//
// The greeting is "MQGV", a 2-byte big-endian length and that many bytes
// of "host:port" (a host name or IP address, in the form
// net.JoinHostPort writes). No remoting frame starts so: its first 4
// bytes are a length, and "MQGV" read as one is far past any frame's
// limit. A server of a version that does not read greetings closes the
// connection for that reason, so a relay greets only a leader whose peer
// Info says it reads them.
//
// The greeting is accepted from any client, not only from members: it
// grants nothing and is kept by nothing but its own connection, whose
// routes, cluster info and consumer topic lists it changes. A client that
// sends one misleads only itself (it could dial any address it likes
// anyway); no other client's answers, no stored state and no
// authentication depend on it. Proving that a greeting comes from a
// member would need a secret sent over the client listener, which is not
// encrypted, and would protect nothing.

var viaMagic = []byte("MQGV")

// maxVia bounds the address a greeting carries.
const maxVia = 255

// ViaGreeting is the greeting naming addr.
func ViaGreeting(addr string) []byte {
	b := make([]byte, 0, len(viaMagic)+2+len(addr))
	b = append(b, viaMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addr)))
	return append(b, addr...)
}

// Greeting returns what a relay in front of this member's remoting
// listener sends the leader for a client connection c: the address this
// member's server would advertise to c (advertised).
func Greeting(advertiseHost string) func(c net.Conn) []byte {
	return func(c net.Conn) []byte {
		addr := c.LocalAddr().String()
		if advertiseHost != "" {
			if _, port, err := net.SplitHostPort(addr); err == nil {
				addr = net.JoinHostPort(advertiseHost, port)
			}
		}
		return ViaGreeting(addr)
	}
}

// readVia consumes a greeting at the start of br and returns its address;
// "" and no error when the connection does not start with one (or ends,
// or times out, first: the frame reader then sees the same).
func readVia(br *bufio.Reader) (string, error) {
	// Decided on the first 4 bytes, which a frame's length needs anyway:
	// a frame is read (and reserved for) as its bytes arrive, so waiting
	// here for more would hold back a frame shorter than a greeting's
	// head, or one whose sender stalls.
	magic, err := br.Peek(len(viaMagic))
	if err != nil || !bytes.Equal(magic, viaMagic) {
		return "", nil
	}
	head, err := br.Peek(len(viaMagic) + 2)
	if err != nil {
		return "", fmt.Errorf("relay greeting: %w", err)
	}
	n := int(binary.BigEndian.Uint16(head[len(viaMagic):]))
	if n == 0 || n > maxVia {
		return "", fmt.Errorf("relay greeting: address of %d bytes", n)
	}
	if _, err := br.Discard(len(head)); err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("relay greeting: %w", err)
	}
	addr := string(b)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("relay greeting: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", fmt.Errorf("relay greeting: bad port in %q", addr)
	}
	if !hostChars(host) || net.JoinHostPort(host, port) != addr {
		return "", fmt.Errorf("relay greeting: bad address %q", addr)
	}
	return addr, nil
}

// hostChars reports whether h is made of what host names and IP
// addresses (with an IPv6 zone) are: ASCII letters, digits, '.', '-',
// '_', ':' and '%'.
func hostChars(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		switch b := h[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.', b == '-', b == '_', b == ':', b == '%':
		default:
			return false
		}
	}
	return true
}
