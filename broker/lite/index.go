package lite

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/broker/model"
)

// entry is one retained message of a lite topic (24 bytes).
type entry struct {
	off   int64  // parent queue offset
	phys  int64  // log position
	size  int32  // record size
	store uint32 // store time, unix seconds
}

// liteTopic is one lite topic of a parent: its retained messages and the
// progress of each group that consumed it.
type liteTopic struct {
	name  string
	queue int32
	// base is the lite offset of msgs[0]: lite offsets count the lite
	// topic's messages from 0 (its first message since it was created).
	base int64
	// last is the store time (unix seconds) of the newest message, or of
	// the send that created the lite topic.
	last   uint32
	msgs   []entry
	groups []*progress
}

// progress is a group's position on a lite topic and its run in flight.
type progress struct {
	group string
	// next is the parent queue offset of the first message not yet
	// acknowledged: everything of the lite topic below it is.
	next int64
	// runEnd is the parent queue offset past the last message of the run
	// in flight; 0 when none is.
	runEnd int64
	// acked are offsets of the run acknowledged ahead of next.
	acked []int64
	gen   uint32
	// deadline (unix ms) is when the run becomes visible again; 0 for an
	// auto-renewed run, held until its client acknowledges or goes away.
	deadline int64
	client   string
	// attempt counts the expired runs of the messages below
	// redeliverEnd (they go out as attempt+1); suspended says the run's
	// invisibility was changed with suspend, so its expiry does not count.
	attempt      int32
	redeliverEnd int64
	suspended    bool
}

// pend is what a send tells the index about a record before the queue
// shows it, so the index need not read it back.
type pend struct {
	lite  string
	phys  int64
	size  int32
	store uint32
}

type queueState struct {
	indexed int64 // next parent queue offset to index
	pending map[int64]pend
}

// parent is a LITE topic's lite topics. mu guards everything below it
// but stalled.
type parent struct {
	mu     sync.Mutex
	topic  model.Topic
	lites  map[string]*liteTopic
	queues []queueState
	// stalled says some queue holds records sends reported past one the
	// index still waits for (read by the arrival hook without mu).
	stalled atomic.Bool
}

func newParent(t model.Topic) *parent {
	return &parent{topic: t, lites: map[string]*liteTopic{}, queues: make([]queueState, max(t.Queues, 1))}
}

// notifier is a broadcast: wait returns a channel closed at the next
// notify. Its lock is a leaf.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) init() { n.ch = make(chan struct{}) }

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// ttlSeconds is the parent's lite TTL in seconds (0: never).
func (p *parent) ttlSeconds() uint32 {
	d := p.topic.LiteExpiry()
	if d <= 0 {
		return 0
	}
	return uint32(max(d.Seconds(), 1))
}

// add indexes one message. A gap longer than the TTL since the lite
// topic's newest message means it expired in between: the name starts a
// new lite topic.
func (p *parent) add(q int32, off int64, pe pend) {
	lt := p.lites[pe.lite]
	if lt == nil {
		lt = &liteTopic{name: pe.lite, queue: q}
		p.lites[pe.lite] = lt
	} else if ttl := p.ttlSeconds(); ttl > 0 && pe.store > lt.last && pe.store-lt.last > ttl && (len(lt.msgs) > 0 || lt.base > 0) {
		*lt = liteTopic{name: lt.name, queue: q}
	}
	lt.queue = q
	lt.msgs = append(lt.msgs, entry{off: off, phys: pe.phys, size: pe.size, store: pe.store})
	lt.last = max(lt.last, pe.store)
}

// first returns the parent queue offset a group without progress starts at.
func (lt *liteTopic) first() int64 {
	if len(lt.msgs) > 0 {
		return lt.msgs[0].off
	}
	return 0
}

// end is the parent offset past the lite topic's newest message.
func (lt *liteTopic) end() int64 {
	if len(lt.msgs) > 0 {
		return lt.msgs[len(lt.msgs)-1].off + 1
	}
	return 0
}

// at returns the index of the first retained message at or after parent
// offset off.
func (lt *liteTopic) at(off int64) int {
	return sort.Search(len(lt.msgs), func(i int) bool { return lt.msgs[i].off >= off })
}

// maxOffset is the lite offset after the newest message.
func (lt *liteTopic) maxOffset() int64 { return lt.base + int64(len(lt.msgs)) }

// liteOffset is the lite offset of the first message at or after parent
// offset off.
func (lt *liteTopic) liteOffset(off int64) int64 { return lt.base + int64(lt.at(off)) }

func (lt *liteTopic) progressOf(group string) *progress {
	for _, pr := range lt.groups {
		if pr.group == group {
			return pr
		}
	}
	return nil
}

func (lt *liteTopic) progressFor(group string) *progress {
	if pr := lt.progressOf(group); pr != nil {
		return pr
	}
	pr := &progress{group: group, next: lt.first()}
	lt.groups = append(lt.groups, pr)
	return pr
}

// trim drops messages every group with progress has acknowledged and
// messages below the queue's retained minimum.
func (lt *liteTopic) trim(queueMin int64) {
	cut := lt.at(queueMin)
	if len(lt.groups) > 0 {
		low := lt.groups[0].next
		for _, pr := range lt.groups[1:] {
			low = min(low, pr.next)
		}
		cut = max(cut, lt.at(low))
	}
	if cut == 0 {
		return
	}
	lt.base += int64(cut)
	if cut == len(lt.msgs) {
		lt.msgs = nil
		return
	}
	// Copy rather than reslice so the dropped prefix's memory goes.
	lt.msgs = slices.Clone(lt.msgs[cut:])
}

// backlog counts a group's ready and in-flight messages.
func (lt *liteTopic) backlog(pr *progress) (ready, inFlight int64) {
	if pr == nil {
		return int64(len(lt.msgs)), 0
	}
	for _, e := range lt.msgs[lt.at(pr.next):] {
		switch {
		case slices.Contains(pr.acked, e.off):
		case pr.runEnd != 0 && e.off < pr.runEnd:
			inFlight++
		default:
			ready++
		}
	}
	return ready, inFlight
}
