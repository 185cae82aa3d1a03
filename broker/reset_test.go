package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
)

func (e *env) reset(group, topic string, to ResetTo, at time.Time) []QueueReset {
	e.t.Helper()
	out, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: group, Topic: topic, To: to, Time: at})
	if err != nil {
		e.t.Fatalf("reset %s/%s to %v: %v", group, topic, to, err)
	}
	return out
}

// drain receives and acks until nothing is visible; it returns the ids.
func (e *env) drain(group, topic string) []string {
	e.t.Helper()
	var got []string
	for {
		d, err := e.receive(group, topic, 32, 30*time.Second)
		if mqerr.KindOf(err) == mqerr.KindMessageNotFound {
			return sorted(got)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		hs := make([]string, len(d))
		for i, x := range d {
			hs[i] = x.ReceiptHandle
			got = append(got, x.ID)
			if x.Attempt != 1 {
				e.t.Fatalf("message %s delivered with attempt %d, want 1", x.ID, x.Attempt)
			}
		}
		for i, err := range e.b.Ack(e.ctx, group, topic, hs) {
			if err != nil {
				e.t.Fatalf("ack %d: %v", i, err)
			}
		}
	}
}

// TestResetOffsetEarliestReplays: a reset to the earliest message delivers
// everything again (first attempt), drops what was in flight (its handles
// no longer ack), moves the committed offsets, and holds across a crash
// (journal replay) and a restart (snapshot).
func TestResetOffsetEarliestReplays(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	sent := sorted(e.send("t", 8, ""))
	d, err := e.receive("g", "t", 8, 30*time.Second)
	if err != nil || len(d) != 8 {
		t.Fatal(err, len(d))
	}
	var hs []string
	for _, x := range d[:5] {
		hs = append(hs, x.ReceiptHandle)
	}
	for _, err := range e.b.Ack(e.ctx, "g", "t", hs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	res := e.reset("g", "t", ResetToEarliest, time.Time{})
	if len(res) != 4 {
		t.Fatalf("%d queues reset, want 4", len(res))
	}
	for _, r := range res {
		lo, hi := e.store.QueueRange("t", r.QueueID)
		if r.Offset != lo || r.Previous != hi {
			t.Fatalf("queue %d: reset %d → %d, want %d → %d", r.QueueID, r.Previous, r.Offset, hi, lo)
		}
		if off, err := e.b.GetOffset(e.ctx, "g", "t", r.QueueID); err != nil || off != lo {
			t.Fatalf("queue %d: committed offset %d (%v), want %d", r.QueueID, off, err, lo)
		}
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[6].ReceiptHandle}); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("ack of a delivery dropped by the reset: %v", errs[0])
	}
	if got := e.drain("g", "t"); !slices.Equal(got, sent) {
		t.Fatalf("after the reset: %v, want %v", got, sent)
	}

	// Durable: reset again, crash (journal replay), replay again.
	e.reset("g", "t", ResetToEarliest, time.Time{})
	e.crash()
	if got := e.drain("g", "t"); !slices.Equal(got, sent) {
		t.Fatalf("after reset and crash: %v, want %v", got, sent)
	}
	e.reset("g", "t", ResetToEarliest, time.Time{})
	e.restart()
	if got := e.drain("g", "t"); !slices.Equal(got, sent) {
		t.Fatalf("after reset and restart: %v, want %v", got, sent)
	}
}

// TestResetOffsetOldHandleAfterReplay: a message delivered again after a
// reset counts its deliveries from the start again, so the handle it got
// before the reset carries the same delivery number and generation as the
// new one. That old handle must not ack or extend the new delivery (its
// holder may still be working on it, and the new holder's ack would then
// fail), before or after a crash (journal replay) and a restart (snapshot):
// with a millisecond between the first delivery, the reset and the new
// delivery, and with all three in the same millisecond.
func TestResetOffsetOldHandleAfterReplay(t *testing.T) {
	for _, gap := range []time.Duration{time.Millisecond, 0} {
		t.Run(gap.String(), func(t *testing.T) { testOldHandleAfterReset(t, gap) })
	}
}

func testOldHandleAfterReset(t *testing.T, gap time.Duration) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 4, "")
	first, err := e.receive("g", "t", 4, 30*time.Second)
	if err != nil || len(first) != 4 {
		t.Fatal(err, len(first))
	}
	old := map[string]string{}
	for _, d := range first {
		old[d.ID] = d.ReceiptHandle
	}
	e.clk.Advance(gap)
	e.reset("g", "t", ResetToEarliest, time.Time{})
	e.clk.Advance(gap)
	again, err := e.receive("g", "t", 4, 30*time.Second)
	if err != nil || len(again) != 4 {
		t.Fatal(err, len(again))
	}
	for i, d := range again {
		if d.Attempt != 1 {
			t.Fatalf("%s: attempt %d after the reset, want 1", d.ID, d.Attempt)
		}
		stale := old[d.ID]
		switch i {
		case 1:
			e.crash()
		case 2:
			e.restart()
		}
		if errs := e.b.Ack(e.ctx, "g", "t", []string{stale}); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
			t.Fatalf("%s: ack with the handle from before the reset: %v", d.ID, errs[0])
		}
		if _, err := e.b.ChangeInvisible(e.ctx, "g", "t", stale, time.Minute); mqerr.KindOf(err) != mqerr.KindInvalidReceiptHandle {
			t.Fatalf("%s: change with the handle from before the reset: %v", d.ID, err)
		}
		h := d.ReceiptHandle
		if i == 3 {
			// A handle minted by ChangeInvisibleDuration for the new
			// delivery is as good as the one it replaces.
			if h, err = e.b.ChangeInvisible(e.ctx, "g", "t", h, time.Minute); err != nil {
				t.Fatalf("%s: change with the new handle: %v", d.ID, err)
			}
		}
		if errs := e.b.Ack(e.ctx, "g", "t", []string{h}); errs[0] != nil {
			t.Fatalf("%s: ack with the new handle (after step %d): %v", d.ID, i, errs[0])
		}
	}
	if got := e.drain("g", "t"); len(got) != 0 {
		t.Fatalf("left after acking every new delivery: %v", got)
	}
}

// TestResetOffsetLatestAndTime: latest skips the backlog (new messages
// still arrive); a time replays exactly what was stored at or after it.
func TestResetOffsetLatestAndTime(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.group("fresh", 0, false)
	early := e.send("t", 6, "a")
	e.clk.Advance(time.Minute)
	at := e.clk.Now()
	late := sorted(e.send("t", 5, "b"))

	// A group that never received, reset to latest: backlog skipped.
	e.reset("fresh", "t", ResetToLatest, time.Time{})
	if got := e.drain("fresh", "t"); len(got) != 0 {
		t.Fatalf("reset to latest, yet received %v", got)
	}
	newer := e.send("t", 2, "c")
	if got := e.drain("fresh", "t"); !slices.Equal(got, sorted(newer)) {
		t.Fatalf("after latest: %v, want %v", got, sorted(newer))
	}

	if got := e.drain("g", "t"); len(got) != len(early)+len(late)+len(newer) {
		t.Fatalf("first pass: %d messages", len(got))
	}
	e.reset("g", "t", ResetToTime, at)
	want := sorted(append(slices.Clone(late), newer...))
	if got := e.drain("g", "t"); !slices.Equal(got, want) {
		t.Fatalf("reset to %v: %v, want %v", at, got, want)
	}
	// A time after everything: the end.
	e.reset("g", "t", ResetToTime, e.clk.Now().Add(time.Hour))
	if got := e.drain("g", "t"); len(got) != 0 {
		t.Fatalf("reset past the end, yet received %v", got)
	}
}

// TestResetOffsetRewindOnly: classic admin's reset with isForce=false
// moves a queue only back, never past messages the group has not
// consumed; the position it compares with is the committed offset, else
// the POP position, else (never consumed) the queue's first message.
func TestResetOffsetRewindOnly(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("pop", 0, false)
	e.group("classic", 0, false)
	e.group("never", 0, false)
	e.send("t", 8, "a")
	e.clk.Advance(time.Minute)
	at := e.clk.Now()
	late := sorted(e.send("t", 8, "b"))
	target := map[int32]int64{}
	for q := int32(0); q < 4; q++ {
		off, err := e.b.QueryOffset(e.ctx, "t", q, offset.Timestamp, at)
		if err != nil {
			t.Fatal(err)
		}
		target[q] = off
	}
	rewind := func(group string) map[int32]QueueReset {
		t.Helper()
		out, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: group, Topic: "t", To: ResetToTime, Time: at, RewindOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]QueueReset{}
		for _, r := range out {
			m[r.QueueID] = r
		}
		if len(m) != 4 {
			t.Fatalf("%s: %d queues reported, want 4: %+v", group, len(m), out)
		}
		return m
	}

	// POP: everything acked, so every queue moves back to the time.
	if got := e.drain("pop", "t"); len(got) != 16 {
		t.Fatalf("first pass: %d", len(got))
	}
	for q, r := range rewind("pop") {
		if r.Kept || r.Offset != target[q] {
			t.Fatalf("pop queue %d: %+v, want moved to %d", q, r, target[q])
		}
	}
	if got := e.drain("pop", "t"); !slices.Equal(got, late) {
		t.Fatalf("pop after the rewind: %v, want %v", got, late)
	}

	// Classic: queue 0 committed at its start (before the time) stays;
	// the others, committed at their end, move back.
	for q := int32(0); q < 4; q++ {
		off, _ := e.store.QueueRange("t", q)
		if q > 0 {
			_, off = e.store.QueueRange("t", q)
		}
		if err := e.b.UpdateOffset(e.ctx, "classic", "t", q, off); err != nil {
			t.Fatal(err)
		}
	}
	for q, r := range rewind("classic") {
		lo, _ := e.store.QueueRange("t", q)
		want := QueueReset{QueueID: q, Previous: lo, Offset: lo, Kept: true}
		if q > 0 {
			_, hi := e.store.QueueRange("t", q)
			want = QueueReset{QueueID: q, Previous: hi, Offset: target[q]}
		}
		if r != want {
			t.Fatalf("classic queue %d: %+v, want %+v", q, r, want)
		}
		if off, err := e.b.GetOffset(e.ctx, "classic", "t", q); err != nil || off != want.Offset {
			t.Fatalf("classic queue %d: committed %d (%v), want %d", q, off, err, want.Offset)
		}
	}

	// Never consumed: it stands at the start, before the time.
	for q, r := range rewind("never") {
		if lo, _ := e.store.QueueRange("t", q); !r.Kept || r.Offset != lo {
			t.Fatalf("never-consumed queue %d: %+v, want kept at %d", q, r, lo)
		}
	}
	if got := e.drain("never", "t"); len(got) != 16 {
		t.Fatalf("the never-consumed group lost messages: %d of 16", len(got))
	}
}

func TestResetOffsetErrors(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	for _, c := range []struct {
		req  ResetOffsetRequest
		kind mqerr.Kind
	}{
		{ResetOffsetRequest{Group: "nope", Topic: "t", To: ResetToEarliest}, mqerr.KindGroupNotFound},
		{ResetOffsetRequest{Group: "g", Topic: "nope", To: ResetToEarliest}, mqerr.KindTopicNotFound},
		{ResetOffsetRequest{Group: "g", Topic: "t"}, mqerr.KindBadRequest},
		{ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToTime}, mqerr.KindBadRequest},
		{ResetOffsetRequest{Group: "g", Topic: "bad topic!", To: ResetToLatest}, mqerr.KindIllegalTopic},
	} {
		if _, err := e.b.ResetOffset(e.ctx, c.req); mqerr.KindOf(err) != c.kind {
			t.Errorf("%+v: %v, want %v", c.req, err, c.kind)
		}
	}
}

// TestResetOffsetOneQueue: a reset of one queue to an exact offset (skip
// one poison message, or replay from one) moves that queue only; other
// queues keep their position. Offsets outside the queue's stored range and
// unknown queues are refused; an offset reset needs the queue.
func TestResetOffsetOneQueue(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 16, "a")
	// Where each message is: by queue, in queue order.
	byQueue := map[int32][]string{}
	var all []*model.Delivered
	for {
		d, err := e.receive("g", "t", 32, 30*time.Second)
		if mqerr.KindOf(err) == mqerr.KindMessageNotFound {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, d...)
	}
	slices.SortFunc(all, func(a, b *model.Delivered) int { return int(a.QueueOffset - b.QueueOffset) })
	for _, d := range all {
		byQueue[d.QueueID] = append(byQueue[d.QueueID], d.ID)
	}
	var q int32 = -1
	for id, ms := range byQueue {
		if len(ms) >= 3 {
			q = id
			break
		}
	}
	if q < 0 {
		t.Fatalf("no queue got 3 of 16 messages: %v", byQueue)
	}
	// Everything is in flight; reset queue q to its offset 1: the flights
	// of q are dropped, q's messages from offset 1 come again, other
	// queues' flights stay (not redelivered).
	one := q
	out, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToOffset, Offset: 1, Queue: &one})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].QueueID != q || out[0].Offset != 1 || out[0].Previous != int64(len(byQueue[q])) {
		t.Fatalf("reset answered %+v, want queue %d from %d to 1", out, q, len(byQueue[q]))
	}
	if got, want := e.drain("g", "t"), sorted(byQueue[q][1:]); !slices.Equal(got, want) {
		t.Fatalf("after resetting queue %d to offset 1: %v, want %v", q, got, want)
	}

	// The end of the queue is a valid offset (skip its backlog); past it,
	// before its start, an unknown queue, or no queue: refused.
	end := int64(len(byQueue[q]))
	for _, c := range []struct {
		off   int64
		queue *int32
		ok    bool
	}{
		{end, &one, true},
		{end + 1, &one, false},
		{-1, &one, false},
		{0, ptr(int32(99)), false},
		{0, nil, false},
	} {
		_, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToOffset, Offset: c.off, Queue: c.queue})
		if c.ok != (err == nil) || !c.ok && mqerr.KindOf(err) != mqerr.KindBadRequest {
			t.Errorf("offset %d queue %v: %v", c.off, c.queue, err)
		}
	}
	// One queue to the earliest: only that queue replays.
	if _, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToEarliest, Queue: &one}); err != nil {
		t.Fatal(err)
	}
	if got, want := e.drain("g", "t"), sorted(byQueue[q]); !slices.Equal(got, want) {
		t.Fatalf("after resetting queue %d to the earliest: %v, want %v", q, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// TestResetOffsetFIFO: a FIFO group's held messages are dropped with the
// delivery they waited for; after the reset the group is delivered in
// order again, one at a time per message group.
func TestResetOffsetFIFO(t *testing.T) {
	e := newEnv(t)
	e.topic("f", model.TopicFIFO)
	e.group("g", 0, true)
	var ids []string
	for i := range 3 {
		id := "fifo-" + string(rune('a'+i))
		res, err := e.b.Send(e.ctx, "f", []*model.Message{{Topic: "f", ID: id, MessageGroup: "order-1", Body: []byte(id)}}, model.Producer{})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		ids = append(ids, id)
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}
	d, err := e.receive("g", "f", 3, 30*time.Second)
	if err != nil || len(d) != 1 || d[0].ID != ids[0] {
		t.Fatalf("first receive: %v %v", err, ids)
	}
	e.reset("g", "f", ResetToEarliest, time.Time{})
	for _, want := range ids {
		d, err := e.receive("g", "f", 3, 30*time.Second)
		if err != nil || len(d) != 1 || d[0].ID != want || d[0].Attempt != 1 {
			t.Fatalf("after the reset: %v %+v, want %s alone", err, d, want)
		}
		if errs := e.b.Ack(e.ctx, "g", "f", []string{d[0].ReceiptHandle}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
}

// TestResetFencesClassicCommits: for resetFenceTime after a reset, a
// classic commit past a reset queue's new offset (a running consumer's
// old offsets, committed during its pause) is not recorded; one at or
// before it is, other queues and groups are not affected, a reset of
// another queue keeps the fence, and once the fence has passed commits
// are recorded again.
func TestResetFencesClassicCommits(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.group("h", 0, false)
	e.send("t", 16, "a")
	cl := e.b.Classic()
	committed := func(group string, q int32) int64 {
		t.Helper()
		off, ok := cl.CommittedOffset(group, "t", q)
		if !ok {
			t.Fatalf("%s has no committed offset for queue %d", group, q)
		}
		return off
	}
	for q := range int32(4) {
		cl.CommitOffset("g", "t", q, 4)
		cl.CommitOffset("h", "t", q, 4)
	}
	one := int32(1)
	if _, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToOffset, Offset: 0, Queue: &one}); err != nil {
		t.Fatal(err)
	}
	two := int32(2) // a second reset, of another queue, keeps queue 1's fence
	if _, err := e.b.ResetOffset(e.ctx, ResetOffsetRequest{Group: "g", Topic: "t", To: ResetToOffset, Offset: 0, Queue: &two}); err != nil {
		t.Fatal(err)
	}
	cl.CommitOffset("g", "t", 1, 4) // the consumer's old offset: held back
	if got := committed("g", 1); got != 0 {
		t.Fatalf("queue 1 after a stale commit during the fence: %d, want 0", got)
	}
	cl.CommitOffset("g", "t", 2, 4)
	if got := committed("g", 2); got != 0 {
		t.Fatalf("queue 2 after a stale commit during the fence: %d, want 0", got)
	}
	cl.CommitOffset("g", "t", 0, 5) // not reset: recorded
	cl.CommitOffset("h", "t", 1, 5) // another group: recorded
	if a, b := committed("g", 0), committed("h", 1); a != 5 || b != 5 {
		t.Fatalf("commits outside the reset: %d and %d, want 5 and 5", a, b)
	}
	cl.CommitOffset("g", "t", 1, 0) // at the new offset: recorded
	if got := committed("g", 1); got != 0 {
		t.Fatalf("queue 1: %d, want 0", got)
	}
	e.clk.Advance(resetFenceTime)
	cl.CommitOffset("g", "t", 1, 3) // progress through the replay, after the fence
	if got := committed("g", 1); got != 3 {
		t.Fatalf("queue 1 after the fence: %d, want 3", got)
	}
}
