package remoting

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// A connection that opens with a relay's greeting gets routes and cluster
// info naming the greeting's address; one without keeps this listener's.
func TestRelayGreetingNamesTheMember(t *testing.T) {
	e := newEnv(t)
	plain := e.dial()
	e.createTopic(plain, "T", 2, "")

	c := e.dial()
	if err := c.WriteRaw(ViaGreeting("member-2.example:19876", "192.0.2.7:5555")); err != nil {
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

// A connection greeted by a relay stands for the client the greeting
// names where the protocol names a client: the born host of what it
// sends, its address in connection listings, the born host of the
// replies it sends. Log lines name the socket's peer, and the client
// beside it.
func TestRelayGreetingNamesTheClient(t *testing.T) {
	const client = "192.0.2.7:5555"
	e := newEnv(t)
	plain := e.dial()
	e.createTopic(plain, "T", 1, "")

	c := e.dial()
	if err := c.WriteRaw(ViaGreeting("member-2.example:19876", client)); err != nil {
		t.Fatal(err)
	}
	e.must(e.send(c, "T", 0, "relayed", ""), codeSuccess)
	e.must(e.send(plain, "T", 0, "direct", ""), codeSuccess)
	rs := records(t, e.must(e.pull(plain, "CG", "T", 0, 0), codeSuccess).Body)
	if len(rs) != 2 {
		t.Fatalf("%d records, want 2", len(rs))
	}
	if string(rs[0].Body) != "relayed" || rs[0].BornHost.String() != client {
		t.Fatalf("sent on the greeted connection: %q born at %v, want %s", rs[0].Body, rs[0].BornHost, client)
	}
	if string(rs[1].Body) != "direct" || !rs[1].BornHost.Addr().IsLoopback() || rs[1].BornHost.Port() == 0 {
		t.Fatalf("sent on a connection without a greeting: %q born at %v, want its loopback socket", rs[1].Body, rs[1].BornHost)
	}

	e.must(e.call(c, reqHeartBeat, nil, heartbeatBody("192.0.2.7@1", []string{"PG"}, map[string][]string{"CG": {"T"}})), codeSuccess)
	e.must(e.call(plain, reqHeartBeat, nil, heartbeatBody("127.0.0.1@2", []string{"PG"}, map[string][]string{"CG": {"T"}})), codeSuccess)
	for _, l := range []struct {
		code      int32
		ext       map[string]string
		connected string
	}{
		{reqGetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, "consumers"},
		{reqGetProducerConnectionList, map[string]string{"producerGroup": "PG"}, "producers"},
	} {
		r := e.must(e.call(plain, l.code, l.ext, nil), codeSuccess)
		var cs struct {
			ConnectionSet []struct{ ClientID, ClientAddr string }
		}
		if err := json.Unmarshal(r.Body, &cs); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
		addrs := map[string]string{}
		for _, x := range cs.ConnectionSet {
			addrs[x.ClientID] = x.ClientAddr
		}
		if len(addrs) != 2 || addrs["192.0.2.7@1"] != client || !strings.HasPrefix(addrs["127.0.0.1@2"], "127.0.0.1:") {
			t.Fatalf("%s listed: %s", l.connected, r.Body)
		}
	}

	// A reply sent on the greeted connection is born at the client.
	pushed := make(chan *codec.Command, 1)
	plain.Handle(reqPushReplyMessageToClient, func(cmd *codec.Command) {
		pushed <- cmd
		_ = plain.Write(&codec.Command{Code: codeSuccess, Opaque: cmd.Opaque, Flag: codec.FlagResponse})
	})
	e.must(e.call(c, reqSendReplyMessage, map[string]string{"producerGroup": "RG", "topic": "DefaultCluster_REPLY_TOPIC",
		"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
		"properties": props("CORRELATION_ID", "c-1", "REPLY_TO_CLIENT", "127.0.0.1@2", "MSG_TYPE", "reply")}, []byte("pong")), codeSuccess)
	if cmd := <-pushed; cmd.Ext["bornHost"] != client {
		t.Fatalf("reply pushed with bornHost %q, want %s", cmd.Ext["bornHost"], client)
	}

	// A log line about the connection names both.
	if err := c.WriteRaw([]byte("\x00\x00\x00\x08\x00\x00\x00\x09xxxx")); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	eventually(t, "the malformed frame logged", func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "malformed frame") {
				if !strings.Contains(l, " remote=127.0.0.1:") || !strings.Contains(l, " relayed_for="+client+" ") {
					t.Fatalf("log line: %s", l)
				}
				return true
			}
		}
		return false
	})
}

// An authentication refusal on a greeted connection names the socket's
// peer, which a greeting cannot change, and the client it claims.
func TestRelayGreetingRefusalNamesBoth(t *testing.T) {
	e := newEnv(t, withAuth(t))
	c := e.dial()
	if err := c.WriteRaw(ViaGreeting("member-2.example:19876", "192.0.2.7:5555")); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil), "authentication required")
	eventually(t, "the refusal logged", func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "auth: call refused") {
				if !strings.Contains(l, `peer="127.0.0.1:`) || !strings.Contains(l, ` (relayed for 192.0.2.7:5555)"`) {
					t.Fatalf("refusal logged as: %s", l)
				}
				return true
			}
		}
		return false
	})
}

// Only the first bytes of a connection may greet: a second greeting (a
// client's own, behind a relay's) is a malformed frame.
func TestRelayGreetingOnlyFirst(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	if err := c.WriteRaw(append(ViaGreeting("member-2.example:19876", "192.0.2.7:5555"), ViaGreeting("elsewhere.example:1", "192.0.2.8:1")...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection still open after a second greeting")
	}
}

// A malformed greeting closes the connection before anything is served:
// a bad member's address or a bad client address alike.
func TestRelayGreetingMalformed(t *testing.T) {
	e := newEnv(t)
	const client = "192.0.2.7:5555"
	for _, g := range [][]byte{
		[]byte("MQGV\x00\x00"),
		ViaGreeting("no-port", client),
		ViaGreeting("host:0", client),
		ViaGreeting(":9876", client),
		ViaGreeting("bad host:9876", client),
		ViaGreeting(`a"b:9876`, client),
		ViaGreeting("h\u00e9te:9876", client),
		ViaGreeting("[host]:9876", client),
		ViaGreeting("host:09876", client),
		ViaGreeting("host:65536", client),
		append([]byte("MQGV\x01\x00"), bytes.Repeat([]byte("a"), 256)...),
		// The client's address: an IP address and port, as
		// netip.AddrPort writes them, and nothing else.
		[]byte("MQGV\x00\x06host:1\x00\x00"),
		ViaGreeting("host:1", ""),
		ViaGreeting("host:1", "client.example:5555"),
		ViaGreeting("host:1", "192.0.2.7"),
		ViaGreeting("host:1", "192.0.2.7:0"),
		ViaGreeting("host:1", "192.0.2.7:05555"),
		ViaGreeting("host:1", "192.0.2.7:65536"),
		ViaGreeting("host:1", "192.000.2.7:5555"),
		ViaGreeting("host:1", "::1:5555"),
		ViaGreeting("host:1", "[::0:1]:5555"),
		ViaGreeting("host:1", "[2001:DB8::1]:5555"),
		ViaGreeting("host:1", "[::ffff:192.0.2.7]:5555"),
		ViaGreeting("host:1", "[fe80::1%eth0]:5555"),
		ViaGreeting("host:1", "192.0.2.7:5555 "),
		ViaGreeting("host:1", "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:55555x"),
		append([]byte("MQGV\x00\x06host:1\x01\x00"), bytes.Repeat([]byte("1"), 256)...),
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
	f.Add(ViaGreeting("127.0.0.1:9876", "127.0.0.1:40000"))
	f.Add(ViaGreeting("[::1]:9876", "[2001:db8::7]:5555"))
	f.Add(ViaGreeting("member.example:9876", "[fe80::1%eth0]:5555"))
	f.Add([]byte("MQGV\x00\x05a:1\x00\x07\x00\x081.2.3.4:5"))
	f.Add([]byte("\x00\x00\x00\x10\x00\x00\x00\x08"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		br := bufio.NewReader(r)
		consumed := func() int { return len(b) - r.Len() - br.Buffered() }
		via, client, err := readVia(br)
		if err != nil {
			return
		}
		if via == "" {
			if client.IsValid() {
				t.Fatalf("a client address %v without a greeting in %q", client, b)
			}
			if n := consumed(); n != 0 {
				t.Fatalf("%d bytes consumed without a greeting", n)
			}
			return
		}
		if !client.IsValid() {
			t.Fatalf("accepted %q from %q without a client address", via, b)
		}
		g := ViaGreeting(via, client.String())
		if !bytes.HasPrefix(b, g) {
			t.Fatalf("accepted %q, %v from %q, which does not start with their greeting", via, client, b)
		}
		if n := consumed(); n != len(g) {
			t.Fatalf("%d bytes consumed, want the greeting's %d", n, len(g))
		}
	})
}
