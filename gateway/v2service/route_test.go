package v2service

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// In a replica group, routes name the members RouteMembers lists: one
// broker listing them all for the Go client, whose channel moves along a
// list; one broker per member, of one address each, for every other
// client (Node.js cannot dial an endpoint of several addresses, C# dials
// the first only). Push consumers' assignments use the same brokers.
func TestComponentRouteReplicaGroup(t *testing.T) {
	members := []RouteMember{{ID: 1, Addr: "10.0.0.1:8081"}, {ID: 3, Addr: "10.0.0.3:8081"}}
	h := newHarness(t, harnessOpts{members: members})
	h.topic("orders", model.TopicFIFO, 3)
	h.group(model.Group{Name: "g"})
	h.group(model.Group{Name: "fg", FIFO: true})
	ep := &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: "10.0.0.2", Port: 8081}}}
	one := func(host string) *v2.Endpoints {
		return &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: host, Port: 8081}}}
	}
	as := func(lang string) context.Context {
		return metadata.AppendToOutgoingContext(h.ctx("c-"+lang, 5*time.Second), "x-mq-language", lang)
	}
	route := func(lang string) []*v2.MessageQueue {
		t.Helper()
		r, err := h.c.QueryRoute(as(lang), &v2.QueryRouteRequest{Topic: res("orders"), Endpoints: ep})
		if err != nil {
			t.Fatal(err)
		}
		code(t, r.Status, v2.Code_OK)
		return r.MessageQueues
	}
	mq := func(id int32, br *v2.Broker) *v2.MessageQueue {
		return &v2.MessageQueue{Topic: res("orders"), Id: id, Permission: v2.Permission_READ_WRITE, Broker: br,
			AcceptMessageTypes: []v2.MessageType{v2.MessageType_FIFO}}
	}
	same := func(what string, got, want []*v2.MessageQueue) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d queues, want %d: %v", what, len(got), len(want), got)
		}
		for i := range got {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("%s: queue %d = %v, want %v", what, i, got[i], want[i])
			}
		}
	}

	list := &v2.Broker{Name: DefaultBrokerName, Endpoints: &v2.Endpoints{Scheme: v2.AddressScheme_IPv4,
		Addresses: []*v2.Address{{Host: "10.0.0.1", Port: 8081}, {Host: "10.0.0.3", Port: 8081}}}}
	same("Go", route("GO"), []*v2.MessageQueue{mq(0, list), mq(1, list), mq(2, list)})

	b1 := &v2.Broker{Name: DefaultBrokerName + "-1", Endpoints: one("10.0.0.1")}
	b3 := &v2.Broker{Name: DefaultBrokerName + "-3", Endpoints: one("10.0.0.3")}
	spread := []*v2.MessageQueue{mq(0, b1), mq(1, b1), mq(2, b1), mq(0, b3), mq(1, b3), mq(2, b3)}
	for _, lang := range []string{"HTTP", "JAVA", "DOTNET", "PYTHON", "CPP"} {
		same(lang, route(lang), spread)
	}

	assign := func(group string) []*v2.Assignment {
		t.Helper()
		r, err := h.c.QueryAssignment(as("HTTP"), &v2.QueryAssignmentRequest{Topic: res("orders"), Group: res(group), Endpoints: ep})
		if err != nil {
			t.Fatal(err)
		}
		code(t, r.Status, v2.Code_OK)
		return r.Assignments
	}
	a := func(id int32, br *v2.Broker) *v2.Assignment {
		return &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: res("orders"), Id: id, Permission: v2.Permission_READ_WRITE, Broker: br}}
	}
	for _, c := range []struct {
		group string
		want  []*v2.Assignment
	}{
		{"g", []*v2.Assignment{a(-1, b1), a(-1, b3)}},          // any queue, through each member
		{"fg", []*v2.Assignment{a(0, b1), a(1, b3), a(2, b1)}}, // each queue once, spread
	} {
		got := assign(c.group)
		if len(got) != len(c.want) {
			t.Fatalf("group %s: assignments %v, want %v", c.group, got, c.want)
		}
		for i := range got {
			if !proto.Equal(got[i], c.want[i]) {
				t.Fatalf("group %s: assignment %d = %v, want %v", c.group, i, got[i], c.want[i])
			}
		}
	}
}
