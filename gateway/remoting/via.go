package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
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
// The leader's socket on a piped connection is the relay's, not the
// client's, so the greeting also names the client's address as the relay
// saw it. The leader reports that address where the protocol reports the
// client: the born host of the messages it sends, the client address of
// producer and consumer listings, the born host of the replies it sends.
//
// The greeting is "MQGV", then two fields, each a 2-byte big-endian
// length and that many bytes: the member's address, "host:port" (a host
// name or IP address, in the form net.JoinHostPort writes), and the
// client's, an IP address and port as netip.AddrPort writes them (no
// zone, an IPv4 address in its 4-byte form). No remoting frame starts
// so: its first 4 bytes are a length, and "MQGV" read as one is far past
// any frame's limit. A server of a version that does not read greetings
// closes the connection for that reason, so a relay greets only a leader
// whose peer Info says it reads them.
//
// The greeting is accepted from any client, not only from members: it
// grants nothing. The member's address is kept by nothing but its own
// connection, whose routes, cluster info and consumer topic lists it
// changes. A client that sends one misleads only itself (it could dial
// any address it likes anyway); no other client's answers, no stored
// state and no authentication depend on it. The client's address a
// greeting claims does reach stored messages and listings, but only as
// the address of the greeting's own sender, and what stands there is a
// client's claim in any case: a gRPC client states its messages' born
// host itself. It is never taken for the connection's peer where that
// matters: authentication does not look at addresses, and every log line
// about the connection, authentication refusals included, names the
// socket's peer, which cannot be forged, and the claim only beside it
// ("relayed_for"). Proving that a greeting comes from a member would need
// a secret sent over the client listener, which is not encrypted, and
// would protect nothing.

var viaMagic = []byte("MQGV")

// maxVia bounds the member's address a greeting carries.
const maxVia = 255

// maxViaClient is the length of the longest client address a greeting
// carries.
const maxViaClient = len("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")

// ViaGreeting is the greeting naming the member's address via and the
// client's address client.
func ViaGreeting(via, client string) []byte {
	b := make([]byte, 0, len(viaMagic)+2+len(via)+2+len(client))
	b = append(b, viaMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(via)))
	b = append(b, via...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(client)))
	return append(b, client...)
}

// Greeting returns what a relay in front of this member's remoting
// listener sends the leader for a client connection c: the address this
// member's server would advertise to c (advertised) and c's remote
// address. Nil (no greeting: the leader then names itself and sees the
// relay as the client) for a connection whose remote address is not an
// IP address and port, which a TCP connection's always is.
func Greeting(advertiseHost string) func(c net.Conn) []byte {
	return func(c net.Conn) []byte {
		client := addrPortOf(c.RemoteAddr())
		if !client.IsValid() || client.Port() == 0 {
			return nil
		}
		// A zone names an interface of this member, meaningless on
		// the leader.
		client = netip.AddrPortFrom(client.Addr().WithZone(""), client.Port())
		addr := c.LocalAddr().String()
		if advertiseHost != "" {
			if _, port, err := net.SplitHostPort(addr); err == nil {
				addr = net.JoinHostPort(advertiseHost, port)
			}
		}
		return ViaGreeting(addr, client.String())
	}
}

// readVia consumes a greeting at the start of br and returns the
// member's and the client's address; "" and no error when the connection
// does not start with one (or ends, or times out, first: the frame reader
// then sees the same).
func readVia(br *bufio.Reader) (string, netip.AddrPort, error) {
	// Decided on the first 4 bytes, which a frame's length needs anyway:
	// a frame is read (and reserved for) as its bytes arrive, so waiting
	// here for more would hold back a frame shorter than a greeting's
	// head, or one whose sender stalls.
	magic, err := br.Peek(len(viaMagic))
	if err != nil || !bytes.Equal(magic, viaMagic) {
		return "", netip.AddrPort{}, nil
	}
	if _, err := br.Discard(len(viaMagic)); err != nil {
		return "", netip.AddrPort{}, err
	}
	addr, err := viaField(br, "address", maxVia)
	if err != nil {
		return "", netip.AddrPort{}, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("relay greeting: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", netip.AddrPort{}, fmt.Errorf("relay greeting: bad port in %q", addr)
	}
	if !hostChars(host) || net.JoinHostPort(host, port) != addr {
		return "", netip.AddrPort{}, fmt.Errorf("relay greeting: bad address %q", addr)
	}
	cs, err := viaField(br, "client address", maxViaClient)
	if err != nil {
		return "", netip.AddrPort{}, err
	}
	client, err := netip.ParseAddrPort(cs)
	if err != nil || client.Port() == 0 || client.Addr().Zone() != "" || client.Addr().Is4In6() || client.String() != cs {
		return "", netip.AddrPort{}, fmt.Errorf("relay greeting: bad client address %q", cs)
	}
	return addr, client, nil
}

// viaField reads one length-prefixed field of a greeting, of 1 to max
// bytes.
func viaField(br *bufio.Reader, what string, max int) (string, error) {
	var lb [2]byte
	if _, err := io.ReadFull(br, lb[:]); err != nil {
		return "", fmt.Errorf("relay greeting: %w", err)
	}
	n := int(binary.BigEndian.Uint16(lb[:]))
	if n == 0 || n > max {
		return "", fmt.Errorf("relay greeting: %s of %d bytes", what, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("relay greeting: %w", err)
	}
	return string(b), nil
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
