package remoting

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
)

// A connection that opens with a relay's greeting gets routes and cluster
// info naming the greeting's address; one without keeps this listener's.
func TestRelayGreetingNamesTheMember(t *testing.T) {
	e := newEnv(t)
	plain := e.dial()
	e.createTopic(plain, "T", 2, "")

	c := e.dial()
	if err := c.WriteRaw(ViaGreeting("member-2.example:19876")); err != nil {
		t.Fatal(err)
	}
	r := e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `"brokerAddrs":{"0":"member-2.example:19876"}`) {
		t.Fatalf("route after a greeting: %s", r.Body)
	}
	ci := e.must(e.call(c, reqGetBrokerClusterInfo, nil, nil), codeSuccess)
	if !strings.Contains(string(ci.Body), "member-2.example:19876") {
		t.Fatalf("cluster info after a greeting: %s", ci.Body)
	}
	// Sends on the greeted connection work as on any other.
	e.must(e.send(c, "T", 0, "x", ""), codeSuccess)

	// Nothing of it reaches another connection, older or newer: a client
	// that sends a greeting misleads only itself.
	for name, other := range map[string]*client.Conn{"older": plain, "newer": e.dial()} {
		r = e.must(e.call(other, reqGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil), codeSuccess)
		if !strings.Contains(string(r.Body), `"brokerAddrs":{"0":"`+e.s.Addr()+`"}`) {
			t.Fatalf("route on an %s connection without a greeting: %s", name, r.Body)
		}
		ci = e.must(e.call(other, reqGetBrokerClusterInfo, nil, nil), codeSuccess)
		if strings.Contains(string(ci.Body), "member-2.example") {
			t.Fatalf("cluster info on an %s connection without a greeting: %s", name, ci.Body)
		}
	}
}

// Only the first bytes of a connection may greet: a second greeting (a
// client's own, behind a relay's) is a malformed frame.
func TestRelayGreetingOnlyFirst(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	if err := c.WriteRaw(append(ViaGreeting("member-2.example:19876"), ViaGreeting("elsewhere.example:1")...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection still open after a second greeting")
	}
}

// A malformed greeting closes the connection before anything is served.
func TestRelayGreetingMalformed(t *testing.T) {
	e := newEnv(t)
	for _, g := range [][]byte{
		[]byte("MQGV\x00\x00"),
		ViaGreeting("no-port"),
		ViaGreeting("host:0"),
		ViaGreeting(":9876"),
		ViaGreeting("bad host:9876"),
		ViaGreeting(`a"b:9876`),
		ViaGreeting("h\u00e9te:9876"),
		ViaGreeting("[host]:9876"),
		ViaGreeting("host:09876"),
		ViaGreeting("host:65536"),
		append([]byte("MQGV\x01\x00"), bytes.Repeat([]byte("a"), 256)...),
	} {
		c := e.dial()
		if err := c.WriteRaw(g); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("greeting %q: connection still open", g)
		}
	}
}

// The greeting's decoder: never a panic; what it accepts is what
// ViaGreeting writes, and it consumes exactly that.
func FuzzReadVia(f *testing.F) {
	f.Add(ViaGreeting("127.0.0.1:9876"))
	f.Add(ViaGreeting("[::1]:9876"))
	f.Add([]byte("MQGV\x00\x05a:1"))
	f.Add([]byte("\x00\x00\x00\x10\x00\x00\x00\x08"))
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		addr, err := readVia(br)
		if err != nil || addr == "" {
			return
		}
		g := ViaGreeting(addr)
		if !bytes.HasPrefix(b, g) {
			t.Fatalf("accepted %q from %q, which does not start with its greeting", addr, b)
		}
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, b[len(g):]) {
			t.Fatalf("%d bytes left after the greeting, want %d", len(rest), len(b)-len(g))
		}
	})
}
