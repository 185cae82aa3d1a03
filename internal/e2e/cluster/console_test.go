package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/chromedp/chromedp"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// clusterView is GET /v1/cluster, as much of it as the test reads.
type clusterView struct {
	Clustered bool   `json:"clustered"`
	NodeID    string `json:"nodeId"`
	Members   []struct {
		ID     string `json:"id"`
		Role   string `json:"role"`
		Health string `json:"health"`
		HTTP   string `json:"httpAddress"`
	} `json:"members"`
	Groups []struct {
		Name     string `json:"name"`
		Leader   string `json:"leader"`
		Commit   string `json:"commitIndex"`
		Replicas []struct {
			Member      string `json:"member"`
			Voter       bool   `json:"voter"`
			Applied     string `json:"appliedIndex"`
			Match       string `json:"matchIndex"`
			LastContact string `json:"lastContact"`
		} `json:"replicas"`
	} `json:"groups"`
}

func getCluster(t *testing.T, httpAddr string) clusterView {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v clusterView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil {
		t.Fatalf("GET /v1/cluster: HTTP %d %s", resp.StatusCode, b)
	}
	return v
}

// The admin API's cluster view and the console's cluster and clients
// pages on a three-member cluster, opened on a member that does not lead
// (its HTTP listener passes the page's calls to the leader): every member
// up with its role, the raft group's replicas with their applied index
// and last contact, a leadership transfer from the page, and the clients
// of both protocols connected through the members.
func TestClusterConsole(t *testing.T) {
	e2eutil.Begin(t)
	rlog.SetLogLevel("fatal")
	g := newGroup(t, "--peer-token", "console-test-peer-token")
	l := g.leader(30 * time.Second)
	f := g.others(l)[0]
	topic, cg := e2eutil.Uniq("console-cl"), e2eutil.Uniq("console-classic")
	e2eutil.CLI(t, f.grpc, "topic", "create", topic, "--queues", "2")
	e2eutil.CLI(t, f.grpc, "group", "create", cg)

	// REST first: the leader answers through any member.
	var v clusterView
	deadline := time.Now().Add(30 * time.Second)
	for {
		v = getCluster(t, f.http)
		up := 0
		for _, m := range v.Members {
			if m.Health == "UP" {
				up++
			}
		}
		if up == 3 && len(v.Groups) == 1 && len(v.Groups[0].Replicas) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster view never had three members up: %+v", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !v.Clustered || v.NodeID != strconv.Itoa(l.id) || v.Groups[0].Name != "broker" || v.Groups[0].Leader != strconv.Itoa(l.id) {
		t.Fatalf("cluster view: %+v", v)
	}
	roles := map[string]string{}
	for _, m := range v.Members {
		roles[m.ID] = m.Role
	}
	for _, m := range g.members {
		want := "FOLLOWER"
		if m == l {
			want = "LEADER"
		}
		if roles[strconv.Itoa(m.id)] != want {
			t.Fatalf("member %d's role %q, want %s: %+v", m.id, roles[strconv.Itoa(m.id)], want, v.Members)
		}
	}
	for _, r := range v.Groups[0].Replicas {
		if !r.Voter || r.Applied == "" || r.Applied == "0" || (r.Member != strconv.Itoa(l.id) && r.LastContact == "") {
			t.Fatalf("replica %+v", r)
		}
	}

	// Clients of both protocols: a classic push consumer (its name server
	// a follower) and an official RocketMQ 5 producer.
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{f.remoting}), consumer.WithGroupName(cg),
		consumer.WithInstance(e2eutil.Uniq("classic")))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, _ ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
	e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	ctx := e2eutil.Browser(t)
	e2eutil.Do(t, ctx, chromedp.Navigate("http://"+f.http+"/console/#/clients"))
	e2eutil.WaitJS(t, ctx, "the clients of both protocols", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#clients tbody tr')];
		const has = (proto, role) => rows.some(tr => tr.querySelector('td.protocol')?.textContent === proto &&
			tr.querySelector('td.roles').textContent.includes(role) && tr.querySelector('td.topics').textContent.includes(%q));
		return has("grpc", "PRODUCER") && has("remoting", "PUSH_CONSUMER");
	})()`, topic))
	e2eutil.Screenshot(t, ctx, "clients")

	e2eutil.Go(t, ctx, "#/cluster", "cluster")
	e2eutil.WaitJS(t, ctx, "three members up, one leading", fmt.Sprintf(`document.querySelectorAll('#members td.health.up').length === 3 &&
		document.querySelector('#members tr[data-member="%d"] td.role').textContent.startsWith("LEADER") &&
		document.querySelector('#raft-groups section[data-group=broker]').dataset.leader === "%d" &&
		[...document.querySelectorAll('#raft-groups td.applied')].every(td => Number(td.textContent) > 0)`, l.id, l.id))
	e2eutil.Screenshot(t, ctx, "cluster")

	// Transfer the leadership from the page to the other follower.
	to := g.others(l)[1]
	e2eutil.Do(t, ctx, chromedp.SetValue(chromedp.CSS(`#raft-groups form.transfer select[name=to]`), strconv.Itoa(to.id)),
		chromedp.Click(chromedp.CSS(`#raft-groups form.transfer button[type=submit]`)))
	e2eutil.WaitJS(t, ctx, "the page showing the new leader", fmt.Sprintf(`document.querySelector('#raft-groups section[data-group=broker]').dataset.leader === "%d" &&
		document.querySelector('#raft-groups form.transfer .msg').textContent === "member %d leads now"`, to.id, to.id))
	if got := g.leader(30 * time.Second); got != to {
		t.Fatalf("member %d leads after the transfer to %d", got.id, to.id)
	}
}
