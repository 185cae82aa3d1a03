package node

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/gateway/relay"
	"github.com/mqgate/mqgate/gateway/remoting"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// fakeRemoting stands for a leader's remoting listener. Each connection's
// first 4 bytes are a frame length, and a length past the frame limit
// closes the connection, as every version's server does; one that reads
// greetings (greets) first takes a greeting off the front. Each frame is
// answered with a line: the greeting's member and client addresses ("-"
// if none), "|" and the frame's bytes.
func fakeRemoting(t *testing.T, greets bool) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	serve := func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		via := "-"
		if head, err := br.Peek(4); greets && err == nil && string(head) == "MQGV" {
			field := func() string {
				var lb [2]byte
				if _, err := io.ReadFull(br, lb[:]); err != nil {
					return ""
				}
				b := make([]byte, binary.BigEndian.Uint16(lb[:]))
				if _, err := io.ReadFull(br, b); err != nil {
					return ""
				}
				return string(b)
			}
			_, _ = br.Discard(4)
			via = field() + "," + field()
		}
		for {
			var lb [4]byte
			if _, err := io.ReadFull(br, lb[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(lb[:])
			if n > codec.DefaultMaxFrame {
				return
			}
			f := make([]byte, n)
			if _, err := io.ReadFull(br, f); err != nil {
				return
			}
			if _, err := c.Write([]byte(via + "|" + string(f) + "\n")); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return lis
}

// The remoting relay greets the leader only when the leader's member info
// says its listener reads the greeting (this version's members say so);
// to a leader of an older version, whose info lacks it, the client's
// bytes go untouched, where a greeting would cost the connection.
func TestRemotingRelayGreetsOnlyALeaderThatReadsIt(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{DataDir: t.TempDir()}, lis: map[string]net.Listener{"remoting-addr": lis}}
	info := n.memberInfo()
	if !info.RemotingGreeting || info.Remoting != lis.Addr().String() {
		t.Fatalf("this member's info: %+v, want its remoting address and RemotingGreeting", info)
	}
	// It names the certificate its gRPC listener presents.
	if cert, err := n.grpcCertificate(); err != nil || info.GRPCCertSHA256 != peer.CertFingerprint(cert.Certificate[0]) {
		t.Fatalf("this member's info names certificate %q (%v)", info.GRPCCertSHA256, err)
	}
	if info := (&Node{cfg: Config{DataDir: t.TempDir()}, lis: map[string]net.Listener{}}).memberInfo(); info.RemotingGreeting {
		t.Fatalf("info of a member without a remoting listener: %+v", info)
	}

	r := relay.New(lis, relay.Options{Name: "remoting-addr", Greeting: remoting.Greeting(""), Logger: quietLogger()})
	go r.Run()
	t.Cleanup(func() { r.Close() })
	n.relays = map[string]*relay.Relay{"remoting-addr": r}

	frame := []byte("\x00\x00\x00\x05hello")
	exchange := func() (string, error) {
		t.Helper()
		c, err := net.Dial("tcp", r.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return "", err
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			got = strings.ReplaceAll(got, c.LocalAddr().String(), "CLIENT")
		}
		return got, err
	}

	old := fakeRemoting(t, false)
	n.route(false, peer.MemberInfo{Remoting: old.Addr().String()})
	if got, err := exchange(); err != nil || got != "-|hello\n" {
		t.Fatalf("through the relay to a leader of an older version: %q, %v", got, err)
	}

	cur := fakeRemoting(t, true)
	n.route(false, peer.MemberInfo{Remoting: cur.Addr().String(), RemotingGreeting: true})
	if got, err := exchange(); err != nil || got != r.Addr().String()+",CLIENT|hello\n" {
		t.Fatalf("through the relay to a leader that reads the greeting: %q, %v", got, err)
	}

	// Why it matters: greeted, the older leader drops the connection.
	n.route(false, peer.MemberInfo{Remoting: old.Addr().String(), RemotingGreeting: true})
	if got, err := exchange(); err == nil {
		t.Fatalf("an older leader answered a greeted connection: %q", got)
	}
}
