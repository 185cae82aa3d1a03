package cluster

import (
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterNodeClientMemberDies runs the official Node.js client (npm
// rocketmq-client-nodejs 1.0.8) against a follower: it sends and receives
// through it, then that member is killed with kill -9 and stays down. The
// routes it got name each follower as a broker of its own address (the
// client cannot dial an endpoint of several), so its producer moves a
// failed send to the other follower's broker and its consumer receives
// through it, without a route refresh (its access point is the member
// that died). Every message sent before and after is received; the first
// send after the kill is answered OK within failoverBound.
func TestClusterNodeClientMemberDies(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	f := g.others(l)[0]
	topic, cg := e2eutil.Uniq("NodeCluster"), e2eutil.Uniq("NodeGroup")
	e2eutil.CLI(t, l.grpc, "topic", "create", topic, "--type", "NORMAL")
	e2eutil.CLI(t, l.grpc, "group", "create", cg)
	var res struct {
		Before         []sentMsg   `json:"before"`
		After          []sentMsg   `json:"after"`
		FailedAfter    int         `json:"failedAfter"`
		MoveMs         int64       `json:"moveMs"`
		ReceiveMs      int64       `json:"receiveMs"`
		ReceivedBefore []delivered `json:"receivedBefore"`
		ReceivedAfter  []delivered `json:"receivedAfter"`
	}
	e2eutil.RunNode(t, e2eutil.NodeRun{Scenario: "failover", Endpoint: f.grpc, Env: []string{"MQ_TOPIC=" + topic, "MQ_GROUP=" + cg},
		OnReady: func() { f.proc.Kill9() }}, &res)
	t.Logf("Node.js client through member %d, killed: first send answered OK %d ms after the kill (%d sends failed before), the 5 sent after it received within %d ms",
		f.id, res.MoveMs, res.FailedAfter, res.ReceiveMs)
	for _, c := range []struct {
		what string
		sent []sentMsg
		got  []delivered
	}{{"before the kill", res.Before, res.ReceivedBefore}, {"after the kill", res.After, res.ReceivedAfter}} {
		want := map[string]string{}
		for _, s := range c.sent {
			want[s.ID] = s.Body
		}
		for _, m := range c.got {
			if want[m.ID] != m.Body || m.Corrupted {
				t.Errorf("%s: received %s %q (corrupted %v), not one of the messages sent", c.what, m.ID, m.Body, m.Corrupted)
			}
			delete(want, m.ID)
		}
		if len(want) > 0 {
			t.Errorf("%s: %d of %d messages sent were not received: %v", c.what, len(want), len(c.sent), want)
		}
	}
	if move := time.Duration(res.MoveMs) * time.Millisecond; move > failoverBound {
		t.Errorf("the Node.js client's first send answered OK came %v after member %d was killed; the bound is %v", move, f.id, failoverBound)
	}
}

// sentMsg and delivered are what scenarios.js reports (view()).
type sentMsg struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

type delivered struct {
	ID        string `json:"id"`
	Topic     string `json:"topic"`
	Body      string `json:"body"`
	Attempt   int    `json:"attempt"`
	Corrupted bool   `json:"corrupted"`
}
