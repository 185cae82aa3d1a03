package v2service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// FuzzSendRequest feeds arbitrary protobuf bytes as a SendMessageRequest
// through the conversion every send takes to the broker's model: it must
// never panic, and what it accepts names one topic for every message.
func FuzzSendRequest(f *testing.F) {
	for _, m := range []*v2.SendMessageRequest{
		{Messages: []*v2.Message{newMsg("orders", "01A", "tag", "body")}},
		{Messages: []*v2.Message{newMsg("orders", "01A", "", "a"), newMsg("payments", "01B", "", "b")}},
		{},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req v2.SendMessageRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		topic, msgs, err := toModelMessages(req.GetMessages())
		if err != nil {
			return
		}
		for _, m := range msgs {
			if m.Topic != topic {
				t.Fatalf("accepted a batch naming %q and %q", topic, m.Topic)
			}
		}
	})
}

// FuzzEndpoints parses advertised and dialed addresses: never a panic,
// and an accepted one has a host.
func FuzzEndpoints(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8081", "[::1]:8081", "host", "host:", ":8081", "[::1", "a:b:c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		ep, err := endpointsFromHostPort(addr, 8081)
		if err != nil {
			return
		}
		if len(ep.GetAddresses()) == 0 {
			t.Fatalf("%q parsed to no address", addr)
		}
	})
}
