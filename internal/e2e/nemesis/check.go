package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Bounds are what Check allows for timing.
type Bounds struct {
	// Slack is how much earlier than the end of its invisibility window,
	// as the client measured it, a delivery may be handed out again. The
	// window's end is judged from the client's side: a receive asked at S
	// for invisible duration d keeps its message from everyone until S+d
	// at the earliest (the server started the window no earlier than S).
	Slack time.Duration
	// DelayEarly is how much earlier than its due time a delayed message
	// may be delivered.
	DelayEarly time.Duration
	// Redeliver is how long after its window ended a delivery that was
	// never acknowledged must have been delivered again, if End is later.
	Redeliver time.Duration
	// End is when the history ended: the last receive returned.
	End time.Time
}

// Rule names a property Check verifies.
type Rule string

const (
	// RuleLost: a send answered OK (normal or delayed) was never
	// delivered.
	RuleLost Rule = "lost"
	// RuleCommittedLost: a transaction's half message was stored (its
	// send answered OK) and its producer means to commit it, and it was
	// never delivered.
	RuleCommittedLost Rule = "committed-lost"
	// RuleRolledBack: a message of a transaction its producer rolls back
	// was delivered.
	RuleRolledBack Rule = "rolled-back-delivered"
	// RuleEndRefused: a transaction's commit or rollback was refused,
	// though its half message was stored (its send answered OK) and
	// nothing had ended it the other way (a valid transaction id must be
	// honoured by whichever member leads).
	RuleEndRefused Rule = "end-tx-refused"
	// RuleUncommitted: a transaction's message was delivered before its
	// producer was asked to, or chose to, commit it.
	RuleUncommitted Rule = "delivered-before-commit"
	// RulePhantom: a delivery carries a body nobody sent, or another body
	// than its message id was sent with.
	RulePhantom Rule = "phantom"
	// RuleWindow: a stored message was handed out again before the
	// invisibility window of an earlier delivery of it ended (neither
	// acknowledged before, nor made visible by a change).
	RuleWindow Rule = "inside-window"
	// RuleAcked: a stored message was delivered again by a receive asked
	// after an acknowledgement of it was answered OK.
	RuleAcked Rule = "acked-redelivered"
	// RuleStaleHandle: an ack or change was answered OK for a handle that
	// was already superseded: by a change answered OK, or by a later
	// delivery of the message received before the ack was asked.
	RuleStaleHandle Rule = "stale-handle-accepted"
	// RuleDelayEarly: a delayed message was delivered before its due time
	// (less Bounds.DelayEarly).
	RuleDelayEarly Rule = "delay-early"
	// RuleDelayTwice: a delayed message sent once was stored (fired) more
	// than once.
	RuleDelayTwice Rule = "delay-fired-twice"
	// RuleNotRedelivered: a delivery was never acknowledged (no ack
	// answered OK, none unanswered) and the message did not come back
	// within Bounds.Redeliver of its window's end.
	RuleNotRedelivered Rule = "unacked-not-redelivered"
)

// Violation is one broken property, with the events that show it.
type Violation struct {
	Rule        Rule
	MsgID, Body string
	Text        string
	Events      []Event
}

// copyKey names one stored copy of a message: a send the client retried
// may be stored twice under one message id, at two offsets.
type copyKey struct {
	id  string
	off int64
}

// delivery is a Deliver event and what was done with its handles.
type delivery struct {
	ev      Event
	key     copyKey
	changes []Event // on its handles, by start time
	acks    []Event // on its handles, by start time
}

// windowEnd is the earliest its invisibility window can end, counting the
// changes asked before t: a change answered OK to duration d' asked at S
// ends it at S+d' at the earliest; one not answered may have done so, or
// not.
func (d *delivery) windowEnd(t time.Time) time.Time {
	w := d.ev.Start.Add(d.ev.Invisible)
	for _, c := range d.changes {
		if !c.Start.Before(t) {
			break
		}
		end := c.Start.Add(c.Invisible)
		switch c.Outcome {
		case OK:
			w = end
		case Unknown:
			if end.Before(w) {
				w = end
			}
		}
	}
	return w
}

// ackedOK is the first ack of d answered OK (by answer time), if any.
func (d *delivery) ackedOK() (Event, bool) {
	var first Event
	ok := false
	for _, a := range d.acks {
		if a.Outcome == OK && (!ok || a.End.Before(first.End)) {
			first, ok = a, true
		}
	}
	return first, ok
}

// mayBeAcked reports whether an ack of d was answered OK or not answered.
func (d *delivery) mayBeAcked() bool {
	for _, a := range d.acks {
		if a.Outcome == OK || a.Outcome == Unknown {
			return true
		}
	}
	return false
}

// before reports whether delivery a of a stored copy was handed out
// before b: a's receive was answered before b's was asked, or the two
// receives overlap in time and a carried the lower delivery attempt.
func before(a, b *delivery) bool {
	if a.ev.End.Before(b.ev.Start) {
		return true
	}
	return overlap(a, b) && a.ev.Attempt < b.ev.Attempt
}

// concurrent reports whether receives a and b overlap in time and
// carried the same attempt: which came first cannot be told.
func concurrent(a, b *delivery) bool { return overlap(a, b) && a.ev.Attempt == b.ev.Attempt }

func overlap(a, b *delivery) bool {
	return !a.ev.End.Before(b.ev.Start) && !b.ev.End.Before(a.ev.Start)
}

// trail is d's delivery followed by its changes and acks.
func (d *delivery) trail() []Event {
	out := append([]Event{d.ev}, d.changes...)
	return append(out, d.acks...)
}

// Check verifies a history against mqgate's delivery guarantees (the
// Rule constants) and returns the violations, in the order of their first
// event.
func Check(events []Event, b Bounds) []Violation {
	es := append([]Event(nil), events...)
	sortEvents(es)

	sends := map[string][]Event{} // by body
	okByID := map[string]Event{}  // sends answered OK, by message id
	commitAsked := map[string]time.Time{}
	var ends []Event                // transaction ends and checks, by start time
	owner := map[string]*delivery{} // by handle
	superseded := map[string]Event{}
	copies := map[copyKey][]*delivery{}
	var deliveries []*delivery
	byBody := map[string][]*delivery{}
	byID := map[string][]*delivery{}
	for _, e := range es {
		switch e.Op {
		case Send:
			sends[e.Body] = append(sends[e.Body], e)
			if e.Outcome == OK && e.MsgID != "" {
				okByID[e.MsgID] = e
			}
		case EndTx, CheckBack:
			ends = append(ends, e)
			if e.Commit && e.Outcome != Refused {
				if t, ok := commitAsked[e.Body]; !ok || e.Start.Before(t) {
					commitAsked[e.Body] = e.Start
				}
			}
		case Deliver:
			d := &delivery{ev: e, key: copyKey{e.MsgID, e.Offset}}
			deliveries = append(deliveries, d)
			owner[e.Handle] = d
			copies[d.key] = append(copies[d.key], d)
			byBody[e.Body] = append(byBody[e.Body], d)
			byID[e.MsgID] = append(byID[e.MsgID], d)
		case Change:
			d := owner[e.Handle]
			if d == nil {
				continue
			}
			d.changes = append(d.changes, e)
			if e.Outcome == OK {
				if _, seen := superseded[e.Handle]; !seen {
					superseded[e.Handle] = e
				}
				if e.NewHandle != "" {
					owner[e.NewHandle] = d
				}
			}
		case Ack:
			if d := owner[e.Handle]; d != nil {
				d.acks = append(d.acks, e)
			}
		}
	}

	var out []Violation
	add := func(r Rule, id, body, text string, evs ...Event) {
		evs = append([]Event(nil), evs...)
		sortEvents(evs)
		out = append(out, Violation{Rule: r, MsgID: id, Body: body, Text: text, Events: evs})
	}

	// What was sent answered OK is delivered; what a transaction rolls
	// back is not, nor before its commit; nothing unsent is.
	bodies := make([]string, 0, len(sends))
	for body := range sends {
		bodies = append(bodies, body)
	}
	sort.Strings(bodies)
	for _, body := range bodies {
		ss := sends[body]
		first := ss[0]
		var okSend *Event
		for i := range ss {
			if ss[i].Outcome == OK {
				okSend = &ss[i]
				break
			}
		}
		switch first.Kind {
		case Normal, Delayed:
			if okSend != nil && len(byID[okSend.MsgID]) == 0 {
				add(RuleLost, okSend.MsgID, body, fmt.Sprintf("the %s send was answered OK and the message was never delivered", first.Kind), ss...)
			}
		case Txn:
			ds := byBody[body]
			if !first.Commit {
				for _, d := range ds {
					add(RuleRolledBack, d.ev.MsgID, body, "the transaction was rolled back (its producer never commits it), yet its message was delivered", append(ss, d.ev)...)
				}
				continue
			}
			if okSend != nil && len(ds) == 0 {
				add(RuleCommittedLost, okSend.MsgID, body, "the half message was stored (send answered OK) and its producer commits it, yet it was never delivered", ss...)
			}
			for _, d := range ds {
				if t, ok := commitAsked[body]; !ok || d.ev.End.Before(t) {
					add(RuleUncommitted, d.ev.MsgID, body, "delivered before any commit of its transaction was asked", append(ss, d.ev)...)
				}
			}
		}
	}
	for i, e := range ends {
		if e.Op != EndTx || e.Outcome != Refused {
			continue
		}
		var okSend *Event
		for _, s := range sends[e.Body] {
			if s.Outcome == OK {
				okSend = &s
				break
			}
		}
		other := false
		for _, o := range ends[:i] {
			other = other || (o.Body == e.Body && o.Commit != e.Commit && o.Outcome != Refused)
		}
		if okSend != nil && !other {
			add(RuleEndRefused, e.MsgID, e.Body, "the transaction's end was refused, though its half message was stored and nothing ended it otherwise", *okSend, e)
		}
	}
	for _, d := range deliveries {
		if len(sends[d.ev.Body]) == 0 {
			add(RulePhantom, d.ev.MsgID, d.ev.Body, "delivered a body that was never sent", d.ev)
		} else if s, ok := okByID[d.ev.MsgID]; ok && s.Body != d.ev.Body {
			add(RulePhantom, d.ev.MsgID, d.ev.Body, fmt.Sprintf("message id %s was sent with body %q", d.ev.MsgID, s.Body), s, d.ev)
		}
	}

	// Delayed messages: never early, stored once.
	for _, body := range bodies {
		s := sends[body][0]
		if s.Kind != Delayed {
			continue
		}
		stored := map[copyKey]bool{}
		var evs []Event
		for _, d := range byBody[body] {
			stored[d.key] = true
			evs = append(evs, d.ev)
			if d.ev.End.Before(s.DeliverAt.Add(-b.DelayEarly)) {
				add(RuleDelayEarly, d.ev.MsgID, body, fmt.Sprintf("delivered %v before it was due (allowed: %v)",
					s.DeliverAt.Sub(d.ev.End).Round(time.Millisecond), b.DelayEarly), s, d.ev)
			}
		}
		if s.OneShot && len(stored) > 1 {
			add(RuleDelayTwice, s.MsgID, body, fmt.Sprintf("sent once, delivered from %d stored copies (offsets %s)", len(stored), offsets(stored)), append([]Event{s}, evs...)...)
		}
	}

	// Per stored copy: windows, acks, handles, redelivery.
	keys := make([]copyKey, 0, len(copies))
	for k := range copies {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].id != keys[j].id {
			return keys[i].id < keys[j].id
		}
		return keys[i].off < keys[j].off
	})
	for _, k := range keys {
		ds := copies[k]
		for i, dk := range ds {
			// Acknowledged before this receive was even asked.
			acked := false
			for j, dj := range ds {
				if a, ok := dj.ackedOK(); ok && j != i && a.End.Before(dk.ev.Start) {
					add(RuleAcked, k.id, dk.ev.Body, fmt.Sprintf("delivered again %v after an ack of it was answered OK",
						dk.ev.Start.Sub(a.End).Round(time.Millisecond)), append(dj.trail(), dk.ev)...)
					acked = true
					break
				}
			}
			if acked {
				continue
			}
			// Handed out inside an earlier delivery's window.
			for j := len(ds) - 1; j >= 0; j-- {
				dj := ds[j]
				if j == i || !(before(dj, dk) || concurrent(dj, dk) && j < i) {
					continue
				}
				w := dj.windowEnd(dk.ev.End)
				if dk.ev.End.Before(w.Add(-b.Slack)) {
					add(RuleWindow, k.id, dk.ev.Body, fmt.Sprintf("handed out again %v before the window of the delivery to %s ended (allowed: %v)",
						w.Sub(dk.ev.End).Round(time.Millisecond), dj.ev.Client, b.Slack), append(dj.trail(), dk.ev)...)
					break
				}
			}
		}
		// Every ack or change answered OK was for the current handle.
		for _, dj := range ds {
			for _, e := range append(append([]Event(nil), dj.changes...), dj.acks...) {
				if e.Outcome != OK {
					continue
				}
				if c, ok := superseded[e.Handle]; ok && c.Seq != e.Seq && c.End.Before(e.Start) {
					add(RuleStaleHandle, k.id, dj.ev.Body, fmt.Sprintf("%s answered OK with a handle superseded by a change answered OK %v before it was asked",
						e.Op, e.Start.Sub(c.End).Round(time.Millisecond)), dj.ev, c, e)
					continue
				}
				for _, dk := range ds {
					if before(dj, dk) && dk.ev.End.Before(e.Start) {
						add(RuleStaleHandle, k.id, dj.ev.Body, fmt.Sprintf("%s answered OK with the handle of a delivery the message had been redelivered since (%v before it was asked)",
							e.Op, e.Start.Sub(dk.ev.End).Round(time.Millisecond)), dj.ev, dk.ev, e)
						break
					}
				}
			}
		}
		// A copy never acknowledged comes back.
		resolved := false
		last := ds[0]
		for _, d := range ds {
			resolved = resolved || d.mayBeAcked()
			if d.windowEnd(b.End).After(last.windowEnd(b.End)) {
				last = d
			}
		}
		if !resolved && !b.End.IsZero() {
			if w := last.windowEnd(b.End); w.Add(b.Redeliver).Before(b.End) {
				add(RuleNotRedelivered, k.id, last.ev.Body, fmt.Sprintf("never acknowledged, and not delivered again in the %v from its window's end to the end of the run",
					b.End.Sub(w).Round(time.Millisecond)), last.trail()...)
			}
		}
	}

	sort.SliceStable(out, func(i, j int) bool { return out[i].Events[0].Start.Before(out[j].Events[0].Start) })
	return out
}

func offsets(m map[copyKey]bool) string {
	var o []string
	for k := range m {
		o = append(o, fmt.Sprint(k.off))
	}
	sort.Strings(o)
	return strings.Join(o, ", ")
}

// Outstanding is what a history still waits for: sends answered OK and
// committed transactions not delivered yet, deliveries neither
// acknowledged nor delivered again (as violations of RuleLost,
// RuleCommittedLost and RuleNotRedelivered). A drain stops when it is
// empty.
func Outstanding(events []Event) []Violation {
	var out []Violation
	for _, v := range Check(events, Bounds{End: time.Unix(1<<40, 0)}) {
		switch v.Rule {
		case RuleLost, RuleCommittedLost, RuleNotRedelivered:
			out = append(out, v)
		}
	}
	return out
}

// Settled is when a history has nothing more to show: the last
// invisibility window it opened has ended (counted from the answers) and
// the last delayed message is due. A redelivery that breaks a rule comes
// after it or not at all.
func Settled(events []Event) time.Time {
	var last time.Time
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	for _, e := range events {
		switch {
		case e.Op == Deliver || (e.Op == Change && e.Outcome != Refused):
			later(e.End.Add(e.Invisible))
		case e.Op == Send && e.Kind == Delayed:
			later(e.DeliverAt)
		}
	}
	return last
}

// Report describes vs for a person: each violation, its events with times
// relative to base, and the lines context gives for it (what happened
// meanwhile: faults, leaders, server log lines), given the span of its
// events.
func Report(vs []Violation, base time.Time, context func(v Violation, from, to time.Time) []string) string {
	if len(vs) == 0 {
		return "no violations"
	}
	var sb strings.Builder
	count := map[Rule]int{}
	for _, v := range vs {
		count[v.Rule]++
	}
	rules := make([]string, 0, len(count))
	for r, n := range count {
		rules = append(rules, fmt.Sprintf("%s: %d", r, n))
	}
	sort.Strings(rules)
	fmt.Fprintf(&sb, "%d violations (%s)\n", len(vs), strings.Join(rules, ", "))
	for i, v := range vs {
		fmt.Fprintf(&sb, "\n#%d %s: message %s body %q: %s\n", i+1, v.Rule, v.MsgID, v.Body, v.Text)
		from, to := v.Events[0].Start, v.Events[0].End
		for _, e := range v.Events {
			fmt.Fprintf(&sb, "    %s\n", e.Format(base))
			if e.End.After(to) {
				to = e.End
			}
		}
		if context != nil {
			if lines := context(v, from, to); len(lines) > 0 {
				sb.WriteString("  meanwhile:\n")
				for _, l := range lines {
					fmt.Fprintf(&sb, "    %s\n", l)
				}
			}
		}
	}
	return sb.String()
}
