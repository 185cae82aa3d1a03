package nemesis

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Op is what a client did.
type Op string

const (
	// Send: a message sent (normal, delayed, or a transaction's half
	// message; Kind says which).
	Send Op = "send"
	// EndTx: a transaction committed or rolled back by its producer.
	EndTx Op = "end-tx"
	// CheckBack: the producer's transaction checker was asked about a
	// transaction, and answered (Commit says what).
	CheckBack Op = "check-back"
	// Deliver: a message received.
	Deliver Op = "deliver"
	// Change: a delivery's invisible duration changed.
	Change Op = "change"
	// Ack: a delivery acknowledged.
	Ack Op = "ack"
)

// Outcome is what the client learnt of an operation.
type Outcome int

const (
	// OK: answered OK.
	OK Outcome = iota + 1
	// Refused: answered with a status that says nothing was done (an
	// invalid or expired handle, a bad request).
	Refused
	// Unknown: no answer, or one that does not say whether it was done (a
	// timeout, a lost leadership, an internal error): it may take effect,
	// or not.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "OK"
	case Refused:
		return "refused"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Kind is the kind of message a send made.
type Kind string

const (
	Normal  Kind = "normal"
	Delayed Kind = "delayed"
	Txn     Kind = "transaction"
)

// Event is one operation as the client saw it. Times are the test
// process's wall clock: Start when the client asked, End when it had the
// answer (or gave up).
type Event struct {
	Seq        int
	Op         Op
	Outcome    Outcome
	Start, End time.Time
	// Client names the producer or consumer; Member is the cluster member
	// that answered (1-based; 0 when the client does not say).
	Client string
	Member int
	// Kind, for sends.
	Kind Kind
	// Body: sends, deliveries, and transaction ends and checks.
	Body  string
	MsgID string
	// Offset is a delivery's queue offset: with the message id it names
	// the stored copy delivered (a send the client retried may be stored
	// twice, under one id).
	Offset int64
	// Attempt is a delivery's attempt number.
	Attempt int32
	// Handle: for a delivery the receipt handle it carried, for a change
	// or ack the handle used. NewHandle: the handle a change answered OK.
	Handle, NewHandle string
	// Invisible: the invisible duration a receive asked for, or the one a
	// change set.
	Invisible time.Duration
	// DeliverAt: when a delayed send asked to be delivered.
	DeliverAt time.Time
	// Commit: for a transaction's send, the resolution its producer means
	// (the checker answers it too); for an end, the one it asked for.
	Commit bool
	// OneShot: a send made once, never retried by a client library; a
	// second stored copy of it can only be the server's doing.
	OneShot bool
	// Detail: the status or error answered.
	Detail string
}

func (e Event) String() string { return e.Format(time.Time{}) }

// Format describes e with its times relative to base (absolute when base
// is zero).
func (e Event) Format(base time.Time) string {
	at := func(t time.Time) string {
		if base.IsZero() {
			return t.Format("15:04:05.000")
		}
		return fmt.Sprintf("%+.3fs", t.Sub(base).Seconds())
	}
	s := fmt.Sprintf("[%s..%s] %s %s", at(e.Start), at(e.End), e.Op, e.Outcome)
	if e.Client != "" {
		s += " by " + e.Client
	}
	if e.Member != 0 {
		s += fmt.Sprintf(" via member %d", e.Member)
	}
	if e.MsgID != "" {
		s += " id " + e.MsgID
	}
	if e.Body != "" {
		s += fmt.Sprintf(" body %q", e.Body)
	}
	switch e.Op {
	case Send:
		s += " (" + string(e.Kind)
		if e.Kind == Txn {
			s += fmt.Sprintf(", meant to commit: %v", e.Commit)
		}
		if !e.DeliverAt.IsZero() {
			s += ", due " + at(e.DeliverAt)
		}
		s += ")"
	case Deliver:
		s += fmt.Sprintf(" offset %d attempt %d invisible %v handle %s", e.Offset, e.Attempt, e.Invisible, Short(e.Handle))
	case Change:
		s += fmt.Sprintf(" handle %s to %v", Short(e.Handle), e.Invisible)
		if e.NewHandle != "" {
			s += " new handle " + Short(e.NewHandle)
		}
	case Ack:
		s += " handle " + Short(e.Handle)
	case EndTx, CheckBack:
		if e.Commit {
			s += " commit"
		} else {
			s += " rollback"
		}
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Short abbreviates a receipt handle for reports: its last 12 characters
// (what changes from one handle of a message to the next).
func Short(h string) string {
	if len(h) <= 12 {
		return h
	}
	return "…" + h[len(h)-12:]
}

// History records events from any goroutine.
type History struct {
	mu     sync.Mutex
	events []Event
}

// Add records e and returns it numbered.
func (h *History) Add(e Event) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = len(h.events) + 1
	h.events = append(h.events, e)
	return e
}

// Events returns a copy of the events recorded so far, by start time.
func (h *History) Events() []Event {
	h.mu.Lock()
	out := append([]Event(nil), h.events...)
	h.mu.Unlock()
	sortEvents(out)
	return out
}

func sortEvents(es []Event) {
	sort.SliceStable(es, func(i, j int) bool {
		if !es[i].Start.Equal(es[j].Start) {
			return es[i].Start.Before(es[j].Start)
		}
		return es[i].Seq < es[j].Seq
	})
}

// Summary counts events by operation and outcome.
func Summary(es []Event) string {
	type key struct {
		op Op
		k  Kind
		o  Outcome
	}
	n := map[key]int{}
	for _, e := range es {
		k := key{e.Op, "", e.Outcome}
		if e.Op == Send {
			k.k = e.Kind
		}
		n[k]++
	}
	keys := make([]key, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.k != b.k {
			return a.k < b.k
		}
		return a.o < b.o
	})
	s := ""
	for _, k := range keys {
		if s != "" {
			s += ", "
		}
		name := string(k.op)
		if k.k != "" {
			name += " " + string(k.k)
		}
		s += fmt.Sprintf("%s %s: %d", name, k.o, n[k])
	}
	return s
}
