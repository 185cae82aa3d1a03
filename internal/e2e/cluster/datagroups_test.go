package cluster

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// Data groups (--data-groups 3): three raft groups over the three
// members, leaders spread one per member, each queue of a topic in the
// group placement names (docs/architecture.md, "Data groups"), clients
// routed to each queue's leader.

// placeGroup is the data group holding queue q of a (non-LITE) topic
// among groups: (fnv32a(topic) + q) mod groups, the documented rule.
func placeGroup(topic string, q int32, groups int) int {
	return int((uint64(fnvHash(topic)) + uint64(q)) % uint64(groups))
}

// groupLeaders asks member m's peer port for each data group's leader
// (0: none known).
func (g *group) groupLeaders(m *member, groups int) []int {
	out := make([]int, groups)
	for gid := range groups {
		s, err := g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", g.id, "--group", strconv.Itoa(gid), "--json")
		if err == nil {
			out[gid] = leaderOf(s)
		}
	}
	return out
}

// balanced waits until every member agrees that each of groups has a
// leader, no member leads more than its share (⌈groups/members⌉: one
// each when there are as many groups as members), and each leader
// serves its group; it returns the leader of each group.
func (g *group) balanced(groups int, timeout time.Duration) []int {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []int
	for time.Now().Before(deadline) {
		var ref []int
		agreed := true
		for _, m := range g.members {
			if m.proc == nil || !alive(m.proc) {
				agreed = false
				break
			}
			ls := g.groupLeaders(m, groups)
			if ref == nil {
				ref = ls
			} else if fmt.Sprint(ls) != fmt.Sprint(ref) {
				agreed = false
			}
		}
		last = ref
		if agreed && spreadLeaders(ref, len(g.members)) && g.serving(ref) {
			return ref
		}
		time.Sleep(200 * time.Millisecond)
	}
	g.t.Fatalf("leaders not spread over the members within %v (last seen %v)", timeout, last)
	return nil
}

// spreadLeaders reports whether every group has a leader and no member
// leads more than ⌈groups/members⌉ of them.
func spreadLeaders(ls []int, members int) bool {
	share := (len(ls) + members - 1) / members
	leads := map[int]int{}
	for _, l := range ls {
		if leads[l]++; l == 0 || leads[l] > share {
			return false
		}
	}
	return true
}

// serving reports whether the leader of each group (by group) logged
// that it serves the group.
func (g *group) serving(leaders []int) bool {
	for gid, id := range leaders {
		m := g.byID(id)
		if m == nil || m.proc == nil {
			return false
		}
		if _, ok := m.proc.WaitLog(0, func(l map[string]any) bool {
			grp, _ := l["group"].(float64)
			return l["msg"] == "this member leads: serving" && int(grp) == gid
		}); !ok {
			return false
		}
	}
	return true
}

// route asks member i for topic's route over the v2 API as a client of
// language lang.
func (a *acker) route(ctx context.Context, i int, topic, lang string) ([]*pb.MessageQueue, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", a.id, "x-mq-language", lang, "x-mq-protocol", "v2")
	resp, err := a.conns[i].QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: topic}})
	if err != nil {
		return nil, err
	}
	if resp.GetStatus().GetCode() != pb.Code_OK {
		return nil, fmt.Errorf("%v: %s", resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	}
	return resp.GetMessageQueues(), nil
}

// queueEnd is queue q's end offset, asked through member i.
func (a *acker) queueEnd(ctx context.Context, i int, topic string, q int32) (int64, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", a.id, "x-mq-language", "GO", "x-mq-protocol", "v2")
	resp, err := a.conns[i].QueryOffset(ctx, &pb.QueryOffsetRequest{MessageQueue: &pb.MessageQueue{Topic: &pb.Resource{Name: topic}, Id: q},
		QueryOffsetPolicy: pb.QueryOffsetPolicy_END})
	if err != nil {
		return 0, err
	}
	if resp.GetStatus().GetCode() != pb.Code_OK {
		return 0, fmt.Errorf("%v: %s", resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	}
	return resp.GetOffset(), nil
}

// TestClusterDataGroups: with --data-groups 3 each member leads one
// group; a topic's queues are spread over the groups and every route
// names each queue at its group's leader; the official client's sends
// land in every group and are all received; an ack sent through a member
// that does not serve the message's group reaches the group (answered
// OK, and the delivery is gone: acknowledging it again is refused).
func TestClusterDataGroups(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "")
	leaders := g.balanced(groups, 60*time.Second)
	t.Logf("leaders by data group: %v", leaders)

	topic, cg := e2eutil.Uniq("dg"), e2eutil.Uniq("dgc")
	const queues = 6
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", strconv.Itoa(queues))
	e2eutil.CLI(t, g.members[1].grpc, "group", "create", cg)

	a := g.acker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Every member answers the same route: each queue at its group's
	// leader, the one address of its broker (every other client) or the
	// first of two, the member after it second (the Go client).
	for i := range g.members {
		for _, lang := range []string{"JAVA", "GO"} {
			mqs, err := a.route(ctx, i, topic, lang)
			if err != nil {
				t.Fatalf("route through member %d: %v", i+1, err)
			}
			if len(mqs) != queues {
				t.Fatalf("route through member %d: %d queues, want %d", i+1, len(mqs), queues)
			}
			named := map[string]bool{}
			for _, mq := range mqs {
				want := g.byID(leaders[placeGroup(topic, mq.GetId(), groups)])
				addrs := mq.GetBroker().GetEndpoints().GetAddresses()
				n := 1
				if lang == "GO" {
					n = 2 // the leader and the member after it
				}
				if len(addrs) != n || net.JoinHostPort(addrs[0].GetHost(), strconv.Itoa(int(addrs[0].GetPort()))) != want.grpc {
					t.Fatalf("%s route through member %d: queue %d at %v, want member %d at %s first of %d addresses", lang, i+1, mq.GetId(), addrs, want.id, want.grpc, n)
				}
				named[want.grpc] = true
			}
			if len(named) != groups {
				t.Fatalf("route through member %d names %d members, want %d", i+1, len(named), groups)
			}
		}
	}

	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	sent := map[string]string{}
	for i := range 60 {
		body := fmt.Sprintf("dg-%d", i)
		sent[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(body)}, 30*time.Second)] = body
	}
	// The sends went to every group's queues.
	perGroup := make([]int64, groups)
	var total int64
	for q := range int32(queues) {
		end, err := a.queueEnd(ctx, int(q)%groups, topic, q)
		if err != nil {
			t.Fatalf("end of queue %d: %v", q, err)
		}
		perGroup[placeGroup(topic, q, groups)] += end
		total += end
	}
	if total != int64(len(sent)) {
		t.Fatalf("the queues hold %d messages, %d were sent", total, len(sent))
	}
	for gid, n := range perGroup {
		if n == 0 {
			t.Fatalf("no message landed in data group %d (per group: %v)", gid, perGroup)
		}
	}
	// Each member's /metrics tells the groups apart: the one leading a
	// group says so, and its store of that group holds the group's sends.
	for _, m := range g.members {
		body := e2eutil.ScrapeMetrics(t, m.proc)
		for gid := range groups {
			grp := map[string]string{"mqgate_group": strconv.Itoa(gid)}
			leading, ok := e2eutil.MetricValue(body, "mqgate_cluster_leading", grp)
			if !ok {
				t.Fatalf("member %d's /metrics has no mqgate_cluster_leading of group %d:\n%s", m.id, gid, grepLines(body, "mqgate_cluster_lead"))
			}
			if (leading == 1) != (leaders[gid] == m.id) {
				t.Fatalf("member %d's /metrics says mqgate_cluster_leading %v for group %d, led by member %d", m.id, leading, gid, leaders[gid])
			}
			if leader, _ := e2eutil.MetricValue(body, "mqgate_cluster_leader", grp); int(leader) != leaders[gid] {
				t.Fatalf("member %d's /metrics names member %v leader of group %d, led by member %d", m.id, leader, gid, leaders[gid])
			}
			if leaders[gid] == m.id {
				if n, _ := e2eutil.MetricValue(body, "mqgate_store_appends_total", grp); int64(n) < perGroup[gid] {
					t.Fatalf("member %d leads group %d and its /metrics counts %v appends to the group's store, %d messages were sent there", m.id, gid, n, perGroup[gid])
				}
			}
		}
	}

	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string]string{}
	viaOther := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(sent) && time.Now().Before(deadline) {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(rctx, 16, 30*time.Second)
		rcancel()
		if err != nil {
			continue
		}
		for _, mv := range mvs {
			got[mv.GetMessageId()] = string(mv.GetBody())
			// Half of the acks go through a member that does not lead the
			// message's group: the member forwards it to the leader.
			q, ok := handleQueue(mv.GetReceiptHandle())
			if !ok {
				t.Fatalf("receipt handle %q names no queue", mv.GetReceiptHandle())
			}
			if viaOther >= 20 {
				mustAckClient(t, c, mv)
				continue
			}
			owner := leaders[placeGroup(topic, q, groups)]
			other := owner % groups // another member's index
			actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := a.ackOnce(actx, other, cg, topic, mv.GetReceiptHandle())
			if err != nil {
				acancel()
				t.Fatalf("ack of a message of queue %d (group led by member %d) through member %d: %v", q, owner, other+1, err)
			}
			if err := a.ackOnce(actx, other, cg, topic, mv.GetReceiptHandle()); err == nil {
				acancel()
				t.Fatalf("a second ack of the same delivery through member %d answered OK", other+1)
			}
			acancel()
			viaOther++
		}
	}
	for id, body := range sent {
		if got[id] != body {
			t.Fatalf("message %s: received %q, sent %q (%d of %d received)", id, got[id], body, len(got), len(sent))
		}
	}

	if viaOther == 0 {
		t.Fatal("no ack went through another member")
	}

	// Deleted through one member and created again through another, the
	// topic starts empty in every group, and what is sent to it then is
	// received (the groups' brokers forgot the consumer's positions).
	e2eutil.CLI(t, g.members[1].grpc, "topic", "delete", topic)
	e2eutil.CLI(t, g.members[2].grpc, "topic", "create", topic, "--queues", strconv.Itoa(queues))
	again := map[string]string{}
	for i := range 9 {
		body := fmt.Sprintf("again-%d", i)
		again[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(body)}, 30*time.Second)] = body
	}
	got = receiveAcked(c, again, 60*time.Second, true)
	if n := missingOf(again, got); n > 0 {
		t.Fatalf("%d of %d messages sent after the topic was made again were not received", n, len(again))
	}
	for id := range got {
		if _, ok := again[id]; !ok {
			t.Fatalf("message %s of the deleted topic delivered again", id)
		}
	}
}

// handleQueue reads the queue a POP receipt handle names: "r1." and
// base64url of version (1 byte), flags (1), queue (4, big-endian), ...
func handleQueue(h string) (int32, bool) {
	enc, ok := strings.CutPrefix(h, "r1.")
	if !ok {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) < 6 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b[2:6])), true
}

// mustAckClient acknowledges mv with the official client.
func mustAckClient(t *testing.T, c rmq.SimpleConsumer, mv *rmq.MessageView) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ack(ctx, mv); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// TestClusterDataGroupsKill9: under sync sends, the member leading a
// data group is killed with kill -9 and restarted: every send answered
// OK is received afterwards, and once the member is back the leaders
// spread one per member again.
func TestClusterDataGroupsKill9(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "", "--flush", "sync")
	leaders := g.balanced(groups, 60*time.Second)
	topic, cg := e2eutil.Uniq("dgkill"), e2eutil.Uniq("dgk")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "6")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	load := startLoad(pr, topic, 4)
	defer load.stop()
	for round := range 2 {
		load.waitFor(t, load.count()+100, 60*time.Second, "before the kill")
		victim := g.byID(leaders[1+round%2])
		victim.proc.Kill9()
		t.Logf("round %d: killed member %d, which led data group %d", round, victim.id, 1+round%2)
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("round %d: after killing member %d", round, victim.id))
		g.start(victim)
		leaders = g.balanced(groups, 60*time.Second)
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("round %d: after member %d came back", round, victim.id))
	}
	acked := load.stop()
	g.receiveAll(topic, cg, acked, "leader kills")
	t.Logf("%d sends answered OK, all received", len(acked))
}

// TestClusterDataGroupsCLI: with data groups, mqgate's own CLI (the REST
// messaging service over gRPC) sends through one member, receives and
// acknowledges through another: FIFO messages go to the group their
// message group names (forwarded to its leader when another member
// leads it), a receive takes messages from every group, and the acks
// reach each message's group.
func TestClusterDataGroupsCLI(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "")
	leaders := g.balanced(groups, 60*time.Second)

	topic, cg := e2eutil.Uniq("dgcli"), e2eutil.Uniq("dgclic")
	const queues = 6
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--type", "FIFO", "--queues", strconv.Itoa(queues))
	e2eutil.CLI(t, g.members[0].grpc, "group", "create", cg, "--fifo")
	sent := map[string]bool{}
	inGroup := map[int]int{}
	for i := range 18 {
		body, mg := fmt.Sprintf("cli-%d", i), fmt.Sprintf("mg-%d", i%9)
		e2eutil.CLI(t, g.members[0].grpc, "send", "--topic", topic, "--group", mg, "--key", "key-"+body, body)
		sent[body] = true
		q := int32(fnvHash(mg) % queues)
		inGroup[placeGroup(topic, q, groups)]++
	}
	if len(inGroup) < 2 {
		t.Fatalf("the message groups all hash to one data group (%v): the test would not forward", inGroup)
	}
	t.Logf("leaders %v; messages by data group %v", leaders, inGroup)

	// The admin API finds every message by key through any member, and
	// browses any queue: each group's answers, forwarded to its leader.
	for body := range sent {
		out := e2eutil.CLI(t, g.members[2].grpc, "message", "show", "key-"+body, "--topic", topic, "--json")
		if !strings.Contains(out, body) {
			t.Fatalf("mqgate message show key-%s through member 3 did not find it:\n%s", body, out)
		}
	}
	conn, err := grpc.NewClient(g.members[2].grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	browsed := 0
	for q := range int32(queues) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := adminv1.NewAdminServiceClient(conn).BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: topic, QueueId: q, Max: 32})
		cancel()
		if err != nil {
			t.Fatalf("browsing queue %d (data group %d) through member 3: %v", q, placeGroup(topic, q, groups), err)
		}
		browsed += len(page.GetMessages())
	}
	if browsed != len(sent) {
		t.Fatalf("browsing every queue through member 3 found %d messages, %d were sent", browsed, len(sent))
	}
	adm := adminv1.NewAdminServiceClient(conn)
	describe := func() *adminv1.DescribeTopicResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := adm.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: topic})
		if err != nil {
			t.Fatalf("describing the topic through member 3: %v", err)
		}
		return d
	}
	d := describe()
	var held int64
	for _, q := range d.GetQueues() {
		held += q.GetMaxOffset() - q.GetMinOffset()
	}
	if d.GetMessages() != int64(len(sent)) || len(d.GetQueues()) != queues || held != int64(len(sent)) {
		t.Fatalf("the topic described through member 3: %d messages over %d queues (%d by their offsets), want %d over %d",
			d.GetMessages(), len(d.GetQueues()), held, len(sent), queues)
	}

	got := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(sent) && time.Now().Before(deadline) {
		for _, body := range cliReceive(t, g.members[1], cg, topic) {
			if got[body] {
				t.Fatalf("%q received twice (its ack through member 2 did not reach its group)", body)
			}
			got[body] = true
		}
	}
	for body := range sent {
		if !got[body] {
			t.Fatalf("%q was not received through member 2 (%d of %d)", body, len(got), len(sent))
		}
	}
	if out := e2eutil.CLI(t, g.members[2].grpc, "receive", "--group", cg, "--topic", topic, "--wait", "1s"); !strings.Contains(out, "no message") {
		t.Fatalf("after every message was acknowledged a receive through member 3 got:\n%s", out)
	}
	// Described through member 3, the group has read every queue of
	// every group to its end.
	for _, p := range describe().GetGroups() {
		if p.GetGroup() != cg {
			continue
		}
		if p.GetBacklog() != 0 || len(p.GetQueues()) != queues {
			t.Fatalf("the group's progress described through member 3: backlog %d over %d queues, want 0 over %d", p.GetBacklog(), len(p.GetQueues()), queues)
		}
		for _, q := range p.GetQueues() {
			if q.GetConsumedOffset() != q.GetMaxOffset() {
				t.Fatalf("the group's progress in queue %d described through member 3: consumed %d of %d", q.GetQueueId(), q.GetConsumedOffset(), q.GetMaxOffset())
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		gd, err := adm.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: cg})
		cancel()
		if err != nil || len(gd.GetTopics()) != 1 || gd.GetTopics()[0].GetBacklog() != 0 {
			t.Fatalf("the group described through member 3: %v (%v)", gd, err)
		}
		// Reset to the earliest through member 3: every group's queues
		// move, and the messages come back through member 1.
		e2eutil.CLI(t, g.members[2].grpc, "group", "reset-offset", cg, "--topic", topic, "--to", "earliest")
		again := map[string]bool{}
		deadline := time.Now().Add(60 * time.Second)
		for len(again) < len(sent) && time.Now().Before(deadline) {
			for _, body := range cliReceive(t, g.members[0], cg, topic) {
				again[body] = true
			}
		}
		if len(again) != len(sent) {
			t.Fatalf("after a reset to the earliest through member 3, %d of %d messages came back", len(again), len(sent))
		}
		return
	}
	t.Fatalf("the topic described through member 3 has no progress of group %s", cg)
}

// cliReceive receives (and acknowledges) once with `mqgate receive`
// through m, and returns the bodies.
func cliReceive(t *testing.T, m *member, cg, topic string) []string {
	t.Helper()
	out := e2eutil.CLI(t, m.grpc, "receive", "--group", cg, "--topic", topic, "--max", "32", "--wait", "1s")
	var bodies []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Body string `json:"body"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Body != "" {
			bodies = append(bodies, r.Body)
		}
	}
	return bodies
}

// fnvHash is the 32-bit FNV-1a of s.
func fnvHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// TestClusterDataGroupsREST: with data groups, the REST API sends
// through one member (FIFO messages forwarded to the leader of the group
// their message group names), receives through another from every group,
// and acknowledges through a third (each handle's ack forwarded to its
// group's leader).
func TestClusterDataGroupsREST(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "")
	g.balanced(groups, 60*time.Second)
	topic, cg := e2eutil.Uniq("dgrest"), e2eutil.Uniq("dgrestc")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--type", "FIFO", "--queues", "6")
	e2eutil.CLI(t, g.members[0].grpc, "group", "create", cg, "--fifo")

	post := func(m *member, path, body string) map[string]any {
		t.Helper()
		resp, err := http.Post("http://"+m.http+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s on member %d: HTTP %d %v (%v)", path, m.id, resp.StatusCode, out, err)
		}
		return out
	}
	items := func(m map[string]any, key string) []map[string]any {
		raw, _ := m[key].([]any)
		out := make([]map[string]any, 0, len(raw))
		for _, x := range raw {
			v, _ := x.(map[string]any)
			out = append(out, v)
		}
		return out
	}

	var msgs []string
	sent := map[string]bool{}
	for i := range 18 {
		body := fmt.Sprintf("rest-%d", i)
		msgs = append(msgs, fmt.Sprintf(`{"text":%q,"messageGroup":"mg-%d"}`, body, i%9))
		sent[body] = true
	}
	res := items(post(g.members[0], "/v1/topics/"+topic+"/messages", `{"messages":[`+strings.Join(msgs[:9], ",")+`]}`), "results")
	res = append(res, items(post(g.members[0], "/v1/topics/"+topic+"/messages", `{"messages":[`+strings.Join(msgs[9:], ",")+`]}`), "results")...)
	for _, r := range res {
		if st, _ := r["status"].(map[string]any); st["code"] != "OK" && st["code"] != float64(20000) {
			t.Fatalf("a REST send through member 1 answered %v", r)
		}
	}

	got := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(sent) && time.Now().Before(deadline) {
		recv := items(post(g.members[1], "/v1/groups/"+cg+"/topics/"+topic+":receive?body=text", `{"maxMessages":32,"waitDuration":"1s"}`), "messages")
		var handles []string
		for _, m := range recv {
			body, _ := m["text"].(string)
			if got[body] {
				t.Fatalf("%q received twice through member 2", body)
			}
			got[body] = true
			h, _ := m["receiptHandle"].(string)
			handles = append(handles, fmt.Sprintf("%q", h))
		}
		if len(handles) == 0 {
			continue
		}
		acks := items(post(g.members[2], "/v1/groups/"+cg+"/topics/"+topic+":ack", `{"receiptHandles":[`+strings.Join(handles, ",")+`]}`), "results")
		for _, a := range acks {
			if st, _ := a["status"].(map[string]any); st["code"] != "OK" && st["code"] != float64(20000) {
				t.Fatalf("a REST ack through member 3 answered %v", a)
			}
		}
	}
	for body := range sent {
		if !got[body] {
			t.Fatalf("%q was not received through member 2 (%d of %d)", body, len(got), len(sent))
		}
	}
	if again := items(post(g.members[1], "/v1/groups/"+cg+"/topics/"+topic+":receive", `{"waitDuration":"1s"}`), "messages"); len(again) > 0 {
		t.Fatalf("after every message was acknowledged a receive got %v", again)
	}
}

// TestClusterDataGroupsDeadLetters: with data groups each group
// dead-letters into a queue of its own; the admin API lists a consumer
// group's dead letters of every group through any member, describes
// them, and redrives them all, at most as many as asked per call.
func TestClusterDataGroupsDeadLetters(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "")
	g.balanced(groups, 60*time.Second)
	topic, cg := e2eutil.Uniq("dgdlq"), e2eutil.Uniq("dgdlqc")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "6")
	e2eutil.CLI(t, g.members[0].grpc, "group", "create", cg)
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	const n = 12
	for i := range n {
		sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("dlq-%d", i))}, 30*time.Second)
	}

	// Received through member 1 without acking, every message is sent to
	// the dead-letter queue through member 1 (each forwarded to its
	// group's leader).
	a := g.acker()
	dead := 0
	deadline := time.Now().Add(60 * time.Second)
	for dead < n && time.Now().Before(deadline) {
		out := e2eutil.CLI(t, g.members[0].grpc, "receive", "--group", cg, "--topic", topic, "--max", "32", "--wait", "1s", "--no-ack")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var m struct {
				ID     string `json:"message_id"`
				Handle string `json:"receipt_handle"`
			}
			if json.Unmarshal([]byte(line), &m) != nil || m.Handle == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", a.id), 10*time.Second)
			resp, err := a.conns[0].ForwardMessageToDeadLetterQueue(ctx, &pb.ForwardMessageToDeadLetterQueueRequest{
				Group: &pb.Resource{Name: cg}, Topic: &pb.Resource{Name: topic}, ReceiptHandle: m.Handle, MessageId: m.ID,
				DeliveryAttempt: 1, MaxDeliveryAttempts: 16})
			cancel()
			if err != nil || resp.GetStatus().GetCode() != pb.Code_OK {
				t.Fatalf("dead-lettering %s through member 1: %v %v", m.ID, resp.GetStatus(), err)
			}
			dead++
		}
	}
	if dead != n {
		t.Fatalf("%d of %d messages dead-lettered", dead, n)
	}

	conn, err := grpc.NewClient(g.members[2].grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	adm := adminv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var page *adminv1.ListDeadLettersResponse
	if !waitFor(20*time.Second, func() bool {
		page, err = adm.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: cg, Max: 32})
		return err == nil && page.GetPending() == n
	}) {
		t.Fatalf("dead letters listed through member 3: %v (%v), want %d pending", page, err, n)
	}
	if len(page.GetMessages()) != n {
		t.Fatalf("dead letters listed through member 3: %d messages, want %d", len(page.GetMessages()), n)
	}
	gd, err := adm.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: cg})
	if err != nil || gd.GetDeadLetterQueue().GetMessages() != n {
		t.Fatalf("the group described through member 3: %v (%v), want %d dead letters", gd.GetDeadLetterQueue(), err, n)
	}
	first, err := adm.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: cg, Max: 5})
	if err != nil || len(first.GetRedriven()) != 5 || first.GetPending() != n-5 {
		t.Fatalf("a redrive of 5 through member 3: %d redriven, %d pending (%v)", len(first.GetRedriven()), first.GetPending(), err)
	}
	rest, err := adm.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: cg, Max: 32})
	if err != nil || len(rest.GetRedriven()) != n-5 || rest.GetPending() != 0 {
		t.Fatalf("the redrive of the rest through member 3: %d redriven, %d pending (%v)", len(rest.GetRedriven()), rest.GetPending(), err)
	}
}
