package remoting

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Traps 12 and 13: every pull answer carries nextBeginOffset, minOffset,
// maxOffset and suggestWhichBrokerId; PULL_OFFSET_MOVED only where the
// table says; nextBeginOffset moves past filtered messages.
func TestPullStatusTable(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	check := func(name string, r *codec.Command, code int32, next string) {
		t.Helper()
		if r.Code != code || r.Ext["nextBeginOffset"] != next {
			t.Fatalf("%s: code %d next %s (%s), want %d %s", name, r.Code, r.Ext["nextBeginOffset"], r.Remark, code, next)
		}
		for _, k := range []string{"minOffset", "maxOffset", "suggestWhichBrokerId"} {
			if _, ok := r.Ext[k]; !ok {
				t.Fatalf("%s: no %s in %+v", name, k, r.Ext)
			}
		}
	}
	check("empty queue at 0", e.pull(c, "CG", "T", 0, 0), codePullNotFound, "0")
	check("empty queue at 5", e.pull(c, "CG", "T", 0, 5), codePullOffsetMoved, "0")
	for i := range 3 {
		tag := "a"
		if i == 1 {
			tag = "b"
		}
		e.must(e.send(c, "T", 0, fmt.Sprint("m", i), props("TAGS", tag)), codeSuccess)
	}
	r := e.pull(c, "CG", "T", 0, 0)
	check("found", r, codeSuccess, "3")
	if rs := records(t, r.Body); len(rs) != 3 || rs[2].QueueOffset != 2 || rs[0].PhysOffset == rs[1].PhysOffset {
		t.Fatalf("records %+v", rs)
	}
	check("at max", e.pull(c, "CG", "T", 0, 3), codePullNotFound, "3")
	check("past max", e.pull(c, "CG", "T", 0, 9), codePullOffsetMoved, "3")
	ext := pullExt("CG", "T", 0, 1, pullSubscription, 0)
	ext["subscription"] = "zzz"
	check("nothing matches", e.call(c, reqPullMessage, ext, nil), codePullRetryImmediately, "3")
	ext["subscription"] = "b || c"
	r = e.call(c, reqPullMessage, ext, nil)
	check("tag filter", r, codeSuccess, "3")
	if rs := records(t, r.Body); len(rs) != 1 || string(rs[0].Body) != "m1" {
		t.Fatalf("filtered %+v", rs)
	}
	ext["expressionType"], ext["subscription"] = "SQL92", "TAGS IN ('b', 'c')"
	r = e.call(c, reqPullMessage, ext, nil)
	check("SQL92 filter", r, codeSuccess, "3")
	if rs := records(t, r.Body); len(rs) != 1 || string(rs[0].Body) != "m1" {
		t.Fatalf("SQL92 filtered %+v", rs)
	}
	ext["subscription"] = "TAGS IN 'b'"
	if r := e.call(c, reqPullMessage, ext, nil); r.Code != codeSubscriptionParseFailed || !strings.Contains(r.Remark, "SQL92") {
		t.Fatalf("malformed SQL92 pull %+v", r)
	}
	e.must(e.call(c, reqPullMessage, pullExt("CG", "T", 7, 0, 0, 0), nil), codeInvalidParameter)
	e.must(e.call(c, reqPullMessage, map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "x"}, nil), codeInvalidParameter)
}

// Trap 11: an empty pull with SUSPEND is held (capped below the client's
// 30 s timeout) and answered PULL_NOT_FOUND at the end of its wait.
func TestLongPollIsHeldAndCapped(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	done := make(chan *codec.Command, 1)
	go func() {
		r, _ := c.Invoke(e.ctx, &codec.Command{Code: reqPullMessage, Ext: pullExt("CG", "T", 0, 0, pullSuspend, 60000)})
		done <- r
	}()
	eventually(t, "the pull to park", func() bool { return e.cl.Parked() == 1 })
	e.clk.Advance(24 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("answered before the 25 s cap: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	e.clk.Advance(time.Second)
	if r := <-done; r == nil || r.Code != codePullNotFound || r.Ext["nextBeginOffset"] != "0" {
		t.Fatalf("held pull: %+v", r)
	}
}

// Offsets: commits through pulls and UPDATE_CONSUMER_OFFSET are the ones
// gRPC's offset API reads; trap 14: a new group on an untrimmed queue
// starts at 0; min/max/timestamp/earliest lookups.
func TestOffsets(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 2, "")
	q := func(group string, zero string) *codec.Command {
		ext := map[string]string{"consumerGroup": group, "topic": "T", "queueId": "1"}
		if zero != "" {
			ext["setZeroIfNotFound"] = zero
		}
		return e.call(c, reqQueryConsumerOffset, ext, nil)
	}
	if r := e.must(q("new", ""), codeSuccess); r.Ext["offset"] != "0" {
		t.Fatalf("new group offset %+v", r.Ext)
	}
	e.must(q("new", "false"), codeQueryNotFound)
	t0 := e.clk.Now()
	for i := range 4 {
		e.must(e.send(c, "T", 1, fmt.Sprint("m", i), ""), codeSuccess)
		e.clk.Advance(time.Second)
	}
	ext := pullExt("CG", "T", 1, 0, pullCommitOffset, 0)
	ext["commitOffset"] = "2"
	e.must(e.call(c, reqPullMessage, ext, nil), codeSuccess)
	if r := e.must(q("CG", ""), codeSuccess); r.Ext["offset"] != "2" {
		t.Fatalf("committed by pull: %+v", r.Ext)
	}
	e.must(e.call(c, reqUpdateConsumerOffset, map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "1", "commitOffset": "3"}, nil), codeSuccess)
	if off, err := e.b.GetOffset(e.ctx, "CG", "T", 1); err != nil || off != 3 {
		t.Fatalf("gRPC's GetOffset sees %d, %v; want 3", off, err)
	}
	if err := e.b.UpdateOffset(e.ctx, "CG", "T", 1, 4); err != nil {
		t.Fatal(err)
	}
	if r := e.must(q("CG", ""), codeSuccess); r.Ext["offset"] != "4" {
		t.Fatalf("committed over gRPC: %+v", r.Ext)
	}
	qe := map[string]string{"topic": "T", "queueId": "1"}
	if r := e.must(e.call(c, reqGetMaxOffset, qe, nil), codeSuccess); r.Ext["offset"] != "4" {
		t.Fatalf("max %+v", r.Ext)
	}
	if r := e.must(e.call(c, reqGetMinOffset, qe, nil), codeSuccess); r.Ext["offset"] != "0" {
		t.Fatalf("min %+v", r.Ext)
	}
	if r := e.must(e.call(c, reqGetEarliestMsgStoreTime, qe, nil), codeSuccess); r.Ext["timestamp"] != fmt.Sprint(t0.UnixMilli()) {
		t.Fatalf("earliest %+v, want %d", r.Ext, t0.UnixMilli())
	}
	ts := map[string]string{"topic": "T", "queueId": "1", "timestamp": fmt.Sprint(t0.Add(1500 * time.Millisecond).UnixMilli())}
	if r := e.must(e.call(c, reqSearchOffsetByTimestamp, ts, nil), codeSuccess); r.Ext["offset"] != "2" {
		t.Fatalf("search lower %+v", r.Ext)
	}
	ts["boundaryType"] = "upper"
	if r := e.must(e.call(c, reqSearchOffsetByTimestamp, ts, nil), codeSuccess); r.Ext["offset"] != "1" {
		t.Fatalf("search upper %+v", r.Ext)
	}
	if off, err := e.b.QueryOffset(e.ctx, "T", 1, offset.End, time.Time{}); err != nil || off != 4 {
		t.Fatalf("%d %v", off, err)
	}
}

// Traps 15, 16, 20 and 31: heartbeats from Go (codeSet strings, subVersion
// in ns) and Java (numbers) register the exact client ids, create the
// group and its retry topic (auto-create off), and get no
// IS_SUPPORT_HEART_BEAT_V2; a closed connection leaves the list at once
// and the remaining members are told (NOTIFY_CONSUMER_IDS_CHANGED).
func TestConsumerListFollowsConnections(t *testing.T) {
	e := newEnv(t)
	a, b := e.dial(), e.dial()
	notified := make(chan string, 4)
	a.Handle(reqNotifyConsumerIDsChanged, func(cmd *codec.Command) {
		if cmd.IsOneway() {
			notified <- cmd.Ext["consumerGroup"]
		}
	})
	r := e.must(e.call(a, reqHeartBeat, nil, heartbeatBody("192.0.2.2@16152", nil, map[string][]string{"CG": {"%RETRY%CG"}})), codeSuccess)
	if _, ok := r.Ext["IS_SUPPORT_HEART_BEAT_V2"]; ok {
		t.Fatal("heartbeat v2 advertised")
	}
	java := `{"clientID":"10.0.0.9@DEFAULT","heartbeatFingerprint":0,"producerDataSet":[],"consumerDataSet":[{"groupName":"CG",` +
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","unitMode":false,` +
		`"subscriptionDataSet":[{"topic":"%RETRY%CG","subString":"*","tagsSet":[],"codeSet":[97,98],"subVersion":1700000000000,"classFilterMode":false,"expressionType":"TAG"}]}]}`
	e.must(e.call(b, reqHeartBeat, nil, []byte(java)), codeSuccess)
	for _, w := range []string{"CG", "CG"} {
		if g := <-notified; g != w {
			t.Fatalf("notified %q", g)
		}
	}
	if _, err := e.b.GetTopic(e.ctx, "%RETRY%CG"); err != nil {
		t.Fatalf("retry topic not created: %v", err)
	}
	list := func() []string {
		r := e.call(a, reqGetConsumerListByGroup, map[string]string{"consumerGroup": "CG"}, nil)
		var body struct {
			ConsumerIDList []string `json:"consumerIdList"`
		}
		_ = json.Unmarshal(r.Body, &body)
		return body.ConsumerIDList
	}
	if got := list(); strings.Join(got, ",") != "10.0.0.9@DEFAULT,192.0.2.2@16152" {
		t.Fatalf("list %v", got)
	}
	b.Close()
	if g := <-notified; g != "CG" {
		t.Fatalf("notified %q", g)
	}
	if got := list(); strings.Join(got, ",") != "192.0.2.2@16152" {
		t.Fatalf("after close: %v", got)
	}
	e.must(e.call(a, reqUnregisterClient, map[string]string{"clientID": "192.0.2.2@16152", "consumerGroup": "CG"}, nil), codeSuccess)
	r = e.must(e.call(a, reqGetConsumerListByGroup, map[string]string{"consumerGroup": "CG"}, nil), codeSystemError)
	if !strings.Contains(r.Remark, "no consumer for this group") {
		t.Fatalf("remark %q", r.Remark)
	}
	e.must(e.call(a, reqHeartBeat, nil, []byte(`{"clientID":"x","producerDataSet":{}}`)), codeInvalidParameter)
}

// Clients not heard from within ClientExpiry leave their groups.
func TestClientsExpireWithoutHeartbeats(t *testing.T) {
	e := newEnv(t)
	a := e.dial()
	e.must(e.call(a, reqHeartBeat, nil, heartbeatBody("c@1", nil, map[string][]string{"CG": {"T"}})), codeSuccess)
	e.clk.Advance(121 * time.Second)
	// The expiry scan runs every 30 s of the clock; its goroutine may arm
	// its timer only after the advance above (a busy machine), so time
	// keeps moving until the scan has run.
	advanceUntil(t, e.clk, 31*time.Second, "the silent client to expire", func() bool { return len(e.s.reg.consumerIDs("CG")) == 0 })
}

// Trap 19: LOCK_BATCH_MQ hands a queue to one client of a group; others
// get it once it is unlocked or its holder's connection closes.
func TestOrderlyLocks(t *testing.T) {
	e := newEnv(t)
	a, b := e.dial(), e.dial()
	body := func(client string) []byte {
		return []byte(fmt.Sprintf(`{"consumerGroup":"CG","clientId":%q,"mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":1}]}`, client))
	}
	got := func(r *codec.Command) int {
		var lb struct {
			LockOKMQSet []messageQueue `json:"lockOKMQSet"`
		}
		if err := json.Unmarshal(r.Body, &lb); err != nil {
			t.Fatal(err)
		}
		return len(lb.LockOKMQSet)
	}
	if n := got(e.must(e.call(a, reqLockBatchMQ, nil, body("A")), codeSuccess)); n != 2 {
		t.Fatalf("A locked %d", n)
	}
	if n := got(e.must(e.call(b, reqLockBatchMQ, nil, body("B")), codeSuccess)); n != 0 {
		t.Fatalf("B locked %d while A holds them", n)
	}
	e.must(e.call(a, reqUnlockBatchMQ, nil, body("A")), codeSuccess)
	if n := got(e.must(e.call(b, reqLockBatchMQ, nil, body("B")), codeSuccess)); n != 2 {
		t.Fatalf("B locked %d after A unlocked", n)
	}
	b.Close()
	eventually(t, "B's locks to go with its connection", func() bool {
		return got(e.must(e.call(a, reqLockBatchMQ, nil, body("A")), codeSuccess)) == 2
	})
}

// Clients lists each heartbeating client once per connection, with its
// groups, subscriptions, language and since (kept across heartbeats on
// the same connection); it leaves with its connection.
func TestClientsListing(t *testing.T) {
	e := newEnv(t)
	a, b := e.dial(), e.dial()
	e.must(e.call(a, reqHeartBeat, nil, heartbeatBody("c@1", []string{"PG"}, map[string][]string{"CG": {"T2", "T1"}})), codeSuccess)
	since := e.clk.Now()
	e.clk.Advance(5 * time.Second)
	e.must(e.call(a, reqHeartBeat, nil, heartbeatBody("c@1", []string{"PG"}, map[string][]string{"CG": {"T2", "T1"}})), codeSuccess)
	e.must(e.call(b, reqHeartBeat, nil, heartbeatBody("p@2", []string{"PG"}, nil)), codeSuccess)
	got := e.s.Clients()
	if len(got) != 2 {
		t.Fatalf("clients: %+v", got)
	}
	c, p := got[0], got[1]
	if c.ClientID != "c@1" || strings.Join(c.ProducerGroups, ",") != "PG" || strings.Join(c.ConsumerGroups, ",") != "CG" ||
		strings.Join(c.Topics, ",") != "T1,T2" || c.ConsumeType == "" || c.Addr == "" || c.Language == "" ||
		!c.Since.Equal(since) || !c.LastSeen.Equal(since.Add(5*time.Second)) {
		t.Fatalf("consumer: %+v (since %v)", c, since)
	}
	if p.ClientID != "p@2" || len(p.ConsumerGroups) != 0 || len(p.Topics) != 0 || p.ConsumeType != "" || p.Addr == c.Addr {
		t.Fatalf("producer: %+v", p)
	}
	a.Close()
	eventually(t, "the closed connection's client to leave", func() bool {
		got := e.s.Clients()
		return len(got) == 1 && got[0].ClientID == "p@2"
	})
}
