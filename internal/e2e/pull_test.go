package e2e

import (
	"slices"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// Offset-based consumption through raw gRPC (no official client uses
// it): PullMessage reads a queue from an offset without receipt handles,
// QueryOffset finds the beginning, the end and the first offset stored at
// or after a timestamp, UpdateOffset/GetOffset round-trip a committed
// offset per group and queue, which survives a restart; bad offsets get
// clear codes and change nothing.
func TestPullOffsetsRoundTripAndQueryByTimestamp(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group, other := uniq("pull"), uniq("g"), uniq("other")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", group)
	cli(t, p, "group", "create", other)
	pr := newProducer(t, p, topic)
	r := dialRaw(t, p)

	early := sendBodies(t, pr, topic, 6, "early")
	// Pull everything so far from both queues; note the newest store time.
	var newest time.Time
	pulled := map[string]bool{}
	ends := r.awaitTotal(topic, 2, int64(len(early)))
	for q := int32(0); q < 2; q++ {
		res := r.pull(group, topic, q, 0, 32, 5*time.Second)
		wantCode(t, "pull", res.status, pb.Code_OK)
		if int64(len(res.msgs)) != ends[q] || res.next == nil || *res.next != ends[q] {
			t.Fatalf("queue %d: pulled %d, next %v, end %d", q, len(res.msgs), res.next, ends[q])
		}
		for i, m := range res.msgs {
			sp := m.GetSystemProperties()
			if sp.GetQueueOffset() != int64(i) || sp.GetQueueId() != q || early[sp.GetMessageId()] != string(m.Body) {
				t.Fatalf("queue %d message %d: %v", q, i, m)
			}
			pulled[sp.GetMessageId()] = true
			if st := sp.GetStoreTimestamp().AsTime(); st.After(newest) {
				newest = st
			}
		}
	}
	if len(pulled) != len(early) {
		t.Fatalf("pulled %d of %d", len(pulled), len(early))
	}
	// A timestamp strictly after every early message, and every later
	// message stored after it (store times have millisecond resolution).
	mid := newest.Add(time.Millisecond)
	for time.Now().Before(mid.Add(time.Millisecond)) {
		time.Sleep(time.Until(mid.Add(time.Millisecond)))
	}
	late := sendBodies(t, pr, topic, 4, "late")
	lateEnds := r.awaitTotal(topic, 2, int64(len(early)+len(late)))

	gotLate := map[string]bool{}
	for q := int32(0); q < 2; q++ {
		qo := r.queryOffset(topic, q, pb.QueryOffsetPolicy_TIMESTAMP, &mid)
		wantCode(t, "QueryOffset TIMESTAMP", qo.Status, pb.Code_OK)
		if qo.Offset != ends[q] {
			t.Fatalf("queue %d: first offset at or after %s is %d, want %d (the first late message)", q, mid.Format(time.RFC3339Nano), qo.Offset, ends[q])
		}
		begin := r.queryOffset(topic, q, pb.QueryOffsetPolicy_BEGINNING, nil)
		wantCode(t, "QueryOffset BEGINNING", begin.Status, pb.Code_OK)
		if begin.Offset != 0 {
			t.Fatalf("queue %d begins at %d", q, begin.Offset)
		}
		end := lateEnds[q]
		res := r.pull(group, topic, q, qo.Offset, 32, 5*time.Second)
		switch {
		case end == qo.Offset:
			wantCode(t, "pull at the end", res.status, pb.Code_MESSAGE_NOT_FOUND)
		default:
			wantCode(t, "pull from the timestamp offset", res.status, pb.Code_OK)
		}
		for _, m := range res.msgs {
			if late[m.GetSystemProperties().GetMessageId()] == "" {
				t.Fatalf("pull from the timestamp offset returned an early message %v", m)
			}
			gotLate[m.GetSystemProperties().GetMessageId()] = true
		}
		if res.next == nil || *res.next != end {
			t.Fatalf("queue %d: next offset %v, end %d", q, res.next, end)
		}
		ends[q] = end
	}
	if len(gotLate) != len(late) {
		t.Fatalf("pulled %d of the %d late messages from the timestamp offsets", len(gotLate), len(late))
	}
	wantCode(t, "QueryOffset TIMESTAMP without a timestamp", r.queryOffset(topic, 0, pb.QueryOffsetPolicy_TIMESTAMP, nil).Status, pb.Code_BAD_REQUEST)

	// Committed offsets: none yet; round trip; a bad one is refused and
	// changes nothing; pulls never move it.
	get := func(r *raw, g string, q int32) *pb.GetOffsetResponse {
		resp, err := r.c.GetOffset(r.ctx(10*time.Second), &pb.GetOffsetRequest{Group: res(g), MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: q}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	update := func(r *raw, g string, q int32, off int64) *pb.Status {
		resp, err := r.c.UpdateOffset(r.ctx(10*time.Second), &pb.UpdateOffsetRequest{Group: res(g), MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: q}, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	wantCode(t, "GetOffset before any commit", get(r, group, 0).Status, pb.Code_OFFSET_NOT_FOUND)
	want := map[int32]int64{0: ends[0] - 1, 1: ends[1]}
	for q, off := range want {
		wantCode(t, "UpdateOffset", update(r, group, q, off), pb.Code_OK)
	}
	wantCode(t, "UpdateOffset beyond the end", update(r, group, 0, ends[0]+10), pb.Code_ILLEGAL_OFFSET)
	bad := r.pull(group, topic, 0, ends[0]+10, 32, 5*time.Second)
	wantCode(t, "pull beyond the end", bad.status, pb.Code_ILLEGAL_OFFSET)
	if bad.next == nil || *bad.next != ends[0] || len(bad.msgs) != 0 {
		t.Fatalf("illegal offset answer: next %v, %d messages (want next %d)", bad.next, len(bad.msgs), ends[0])
	}
	for q, off := range want {
		if g := get(r, group, q); g.Status.GetCode() != pb.Code_OK || g.Offset != off {
			t.Fatalf("queue %d: GetOffset %v, want %d", q, g, off)
		}
	}
	wantCode(t, "another group's offset", get(r, other, 0).Status, pb.Code_OFFSET_NOT_FOUND)

	// Committed offsets are persisted: a clean restart keeps them. (They
	// are flushed every few seconds and at shutdown, like upstream's
	// consumer offsets; a kill -9 may lose the last seconds of commits.)
	_ = pr.GracefulStop() // while the server is up: its stop is quick then
	p.Stop(30 * time.Second)
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	r2 := dialRaw(t, p2)
	for q, off := range want {
		if g := get(r2, group, q); g.Status.GetCode() != pb.Code_OK || g.Offset != off {
			t.Fatalf("after the restart queue %d: GetOffset %v, want %d", q, g, off)
		}
	}
	// And the queues still read the same.
	var again []string
	for q := int32(0); q < 2; q++ {
		res := r2.pull(group, topic, q, 0, 32, 5*time.Second)
		wantCode(t, "pull after the restart", res.status, pb.Code_OK)
		for _, m := range res.msgs {
			again = append(again, m.GetSystemProperties().GetMessageId())
		}
	}
	if len(again) != len(early)+len(late) || slices.ContainsFunc(again, func(id string) bool { return early[id] == "" && late[id] == "" }) {
		t.Fatalf("after the restart the queues hold %v", again)
	}
}
