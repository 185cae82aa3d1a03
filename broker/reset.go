package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
)

// ResetTo says where ResetOffset moves a group.
type ResetTo int8

const (
	// ResetToTime: each queue's first message stored at or after Time (the
	// queue's end when none is).
	ResetToTime ResetTo = iota + 1
	// ResetToEarliest: each queue's first retained message (replay all).
	ResetToEarliest
	// ResetToLatest: each queue's end (skip the backlog).
	ResetToLatest
	// ResetToOffset: Offset in the one queue Queue names.
	ResetToOffset
)

// ResetOffsetRequest names the group, the topic and the new position.
type ResetOffsetRequest struct {
	Group  string
	Topic  string
	To     ResetTo
	Time   time.Time // ResetToTime only
	Offset int64     // ResetToOffset only: within the queue's [min, max]
	// Queue restricts the reset to one queue (required for
	// ResetToOffset); nil means every queue of the topic.
	Queue *int32
	// RewindOnly moves a queue only when the target is before the
	// group's position there (classic admin's isForce=false): its
	// committed offset, else its first message in flight or never read
	// by its POP receives, else (never consumed) the queue's first
	// message. The other queues keep their positions (QueueReset.Kept).
	RewindOnly bool
}

// QueueReset is one queue's move.
type QueueReset struct {
	QueueID int32
	// Previous is the group's position before: the next offset it would
	// have received (the queue's min offset when it never received).
	Previous int64
	Offset   int64 // the new position
	// Kept: RewindOnly left the queue where it was (Offset = Previous =
	// the group's position).
	Kept bool
}

// ResetOffset moves a consumer group's position in a topic, on every
// queue or on the one req.Queue names: what it receives next (POP
// receives over gRPC, REST and classic POP) starts at the new position,
// and its committed offsets (pull and offset APIs, classic consumers) are
// set to it. Messages the group had in flight in the queues moved are
// dropped: their receipt handles stop working and they are not
// redelivered unless the new position is at or before them. The change is
// durable when this returns.
func (b *Broker) ResetOffset(ctx context.Context, req ResetOffsetRequest) ([]QueueReset, error) {
	if err := b.checkNames(req.Group, req.Topic); err != nil {
		return nil, err
	}
	var policy offset.Policy
	switch req.To {
	case ResetToTime:
		if req.Time.IsZero() {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "a reset to a time needs the time")
		}
		policy = offset.Timestamp
	case ResetToEarliest:
		policy = offset.Beginning
	case ResetToLatest:
		policy = offset.End
	case ResetToOffset:
		if req.Queue == nil {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "a reset to an offset names the queue")
		}
	default:
		return nil, mqerr.Errorf(mqerr.KindBadRequest, "reset to what: a time, the earliest or the latest message, or an offset")
	}
	// Neither is auto-created: a reset names what exists.
	g, err := b.s().meta.GetGroup(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	t, err := b.s().meta.GetTopic(ctx, req.Topic)
	if err != nil {
		return nil, err
	}
	queues := make([]int32, 0, t.Queues)
	if req.Queue != nil {
		if q := *req.Queue; q < 0 || q >= t.Queues {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "queue %d: topic %q has queues 0 to %d", q, t.Name, t.Queues-1)
		}
		if !b.cfg.Placement.Holds(t.Name, t.Type == model.TopicLite, *req.Queue) {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "queue %d of topic %q is in data group %d, not this broker's (%d)",
				*req.Queue, t.Name, b.cfg.Placement.Layout().GroupOf(t.Name, t.Type == model.TopicLite, *req.Queue), b.cfg.Placement.Group)
		}
		queues = append(queues, *req.Queue)
	} else {
		// With data groups, the queues of this broker's group only.
		for q := int32(0); q < t.Queues; q++ {
			if b.cfg.Placement.Holds(t.Name, t.Type == model.TopicLite, q) {
				queues = append(queues, q)
			}
		}
	}
	targets := make(map[int32]int64, len(queues))
	for _, q := range queues {
		if req.To == ResetToOffset {
			lo, hi := b.store.QueueRange(t.Name, q)
			if req.Offset < lo || req.Offset > hi {
				return nil, mqerr.Errorf(mqerr.KindBadRequest, "offset %d: queue %d of topic %q holds offsets %d to %d (%d is its end)",
					req.Offset, q, t.Name, lo, hi, hi)
			}
			targets[q] = req.Offset
			continue
		}
		if targets[q], err = b.s().offs.Query(t, q, policy, req.Time); err != nil {
			return nil, err
		}
	}
	var kept []QueueReset
	var posOf map[int32]int64 // RewindOnly: the positions compared with
	if req.RewindOnly {
		posOf = make(map[int32]int64, len(queues))
		moving := queues[:0:0]
		for _, q := range queues {
			pos := b.position(t, g.Name, q)
			posOf[q] = pos
			if targets[q] >= pos {
				kept = append(kept, QueueReset{QueueID: q, Previous: pos, Offset: pos, Kept: true})
				delete(targets, q)
				continue
			}
			moving = append(moving, q)
		}
		queues = moving
		if len(queues) == 0 {
			b.log.Info("broker: group offset reset moved nothing (rewind only)", "group", g.Name, "topic", t.Name)
			return kept, nil
		}
	}
	prev, err := b.s().pop.Reset(ctx, g.Name, t.Name, targets)
	if err != nil {
		return nil, err
	}
	out := make([]QueueReset, 0, len(queues))
	for i, q := range queues {
		// Committed offsets (pull and classic consumers) move too; the
		// last update flushes them all.
		if _, err := b.s().offs.Update(t, g.Name, q, targets[q], i == len(queues)-1); err != nil {
			return nil, fmt.Errorf("the receive position moved, but committing offset %d of queue %d failed: %w", targets[q], q, err)
		}
		lo, _ := b.store.QueueRange(t.Name, q)
		p := prev[q]
		if p < lo {
			p = lo // never read (-1), or retention passed it
		}
		if pos, ok := posOf[q]; ok {
			p = pos
		}
		out = append(out, QueueReset{QueueID: q, Previous: p, Offset: targets[q]})
	}
	to := req.To.String()
	switch req.To {
	case ResetToTime:
		to = req.Time.UTC().Format(time.RFC3339Nano)
	case ResetToOffset:
		to = fmt.Sprintf("offset %d", req.Offset)
	}
	b.log.Info("broker: group offset reset", "group", g.Name, "topic", t.Name, "to", to, "queues", len(queues))
	b.fenceClassicCommits(g.Name, t.Name, targets)
	b.resetMu.Lock()
	ls := b.resetListeners
	b.resetMu.Unlock()
	ev := OffsetsReset{Group: g.Name, Topic: t.Name, To: req.To, Time: req.Time, Queues: out}
	for _, l := range ls {
		l.OffsetsReset(ev)
	}
	if len(kept) > 0 {
		// A copy: the listeners may keep ev.Queues.
		out = append(slices.Clip(out), kept...)
		slices.SortFunc(out, func(a, b QueueReset) int { return cmp.Compare(a.QueueID, b.QueueID) })
	}
	return out, nil
}

// position is where group stands in queue q of t (see RewindOnly).
func (b *Broker) position(t model.Topic, group string, q int32) int64 {
	if off, err := b.s().offs.Get(t, group, q); err == nil {
		return off
	}
	if off, ok := b.s().pop.Position(group, t.Name, q); ok {
		return off
	}
	lo, _ := b.store.QueueRange(t.Name, q)
	return lo
}

// OffsetsReset tells a ResetListener what a ResetOffset did.
type OffsetsReset struct {
	Group, Topic string
	To           ResetTo
	Time         time.Time    // ResetToTime only
	Queues       []QueueReset // the queues moved, by queue id
}

// A ResetListener hears of every offset reset once it is durable: a
// listener whose clients keep their own positions in memory (classic
// consumers) tells them, or they would go on where they were and commit
// their old offsets over the new ones. OffsetsReset must not block: it
// runs inside ResetOffset.
type ResetListener interface {
	OffsetsReset(OffsetsReset)
}

// AddResetListener adds l to the listeners ResetOffset tells.
func (b *Broker) AddResetListener(l ResetListener) {
	b.resetMu.Lock()
	defer b.resetMu.Unlock()
	b.resetListeners = append(slices.Clip(b.resetListeners), l)
}

func (r ResetTo) String() string {
	switch r {
	case ResetToTime:
		return "time"
	case ResetToEarliest:
		return "earliest"
	case ResetToLatest:
		return "latest"
	case ResetToOffset:
		return "offset"
	}
	return fmt.Sprintf("ResetTo(%d)", int8(r))
}

// resetFenceTime is how long after a reset classic commits that would
// move a reset queue past its new offset are held back. A running classic
// push consumer told of a reset (RESET_CONSUMER_CLIENT_OFFSET) pauses for
// 10 s with its old offsets still in memory, and its periodic commit in
// that pause writes them back over the reset; the Go client then reads
// its start offset from the broker, racing its own commit of the new
// one, and one queue or another is not replayed. Commits at or before the
// new offset pass, and so do all commits once the fence has passed: a
// consumer's progress through the replay is recorded by its next commit.
const resetFenceTime = 15 * time.Second

type resetFenceKey struct{ group, topic string }

// resetFence holds, per queue reset lately, the offset it was reset to
// and when its fence ends. It is replaced, never changed.
type resetFence map[int32]fencedQueue

type fencedQueue struct {
	target int64
	until  time.Time
}

// fenceClassicCommits fences group's classic commits in topic for the
// queues in targets (resetFenceTime), keeping the live fences of other
// queues, and drops the fences that have ended.
func (b *Broker) fenceClassicCommits(group, topic string, targets map[int32]int64) {
	now := b.cfg.Clock.Now()
	until := now.Add(resetFenceTime)
	b.resetMu.Lock()
	defer b.resetMu.Unlock()
	b.resetFences.Range(func(k, v any) bool {
		if f := v.(resetFence); !f.liveAt(now) {
			b.resetFences.CompareAndDelete(k, v)
		}
		return true
	})
	k := resetFenceKey{group, topic}
	f := resetFence{}
	if old, ok := b.resetFences.Load(k); ok {
		for q, fq := range old.(resetFence) {
			if now.Before(fq.until) {
				f[q] = fq
			}
		}
	}
	for q, target := range targets {
		f[q] = fencedQueue{target: target, until: until}
	}
	b.resetFences.Store(k, f)
}

// liveAt reports whether any of f's queues is still fenced at now.
func (f resetFence) liveAt(now time.Time) bool {
	for _, fq := range f {
		if now.Before(fq.until) {
			return true
		}
	}
	return false
}

// fencedCommit reports whether a classic commit of offset for queue is
// held back by a recent reset.
func (b *Broker) fencedCommit(group, topic string, queue int32, offset int64) bool {
	v, ok := b.resetFences.Load(resetFenceKey{group, topic})
	if !ok {
		return false
	}
	fq, ok := v.(resetFence)[queue]
	return ok && offset > fq.target && b.cfg.Clock.Now().Before(fq.until)
}
