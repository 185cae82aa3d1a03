package nemesis

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// hist builds synthetic histories; times are milliseconds after t0.
type hist struct{ h History }

func (b *hist) send(kind Kind, body, id string, o Outcome, start, end int) *hist {
	b.h.Add(Event{Op: Send, Kind: kind, Body: body, MsgID: id, Outcome: o, Start: ms(start), End: ms(end), Client: "p"})
	return b
}

func (b *hist) txSend(body, id string, commit bool, o Outcome, start, end int) *hist {
	b.h.Add(Event{Op: Send, Kind: Txn, Body: body, MsgID: id, Commit: commit, Outcome: o, Start: ms(start), End: ms(end), Client: "p"})
	return b
}

func (b *hist) delayed(body, id string, due int, start, end int) *hist {
	b.h.Add(Event{Op: Send, Kind: Delayed, Body: body, MsgID: id, OneShot: true, DeliverAt: ms(due), Outcome: OK, Start: ms(start), End: ms(end), Client: "p"})
	return b
}

func (b *hist) endTx(body, id string, commit bool, o Outcome, start, end int) *hist {
	b.h.Add(Event{Op: EndTx, Body: body, MsgID: id, Commit: commit, Outcome: o, Start: ms(start), End: ms(end), Client: "p"})
	return b
}

func (b *hist) checkBack(body, id string, commit bool, at int) *hist {
	b.h.Add(Event{Op: CheckBack, Body: body, MsgID: id, Commit: commit, Outcome: OK, Start: ms(at), End: ms(at), Client: "p"})
	return b
}

// deliver: consumer c received id (body) at offset off with handle h,
// asked at start for invisible ms, answered at end.
func (b *hist) deliver(c, body, id string, off int64, h string, invisible, start, end int) *hist {
	b.h.Add(Event{Op: Deliver, Outcome: OK, Client: c, Body: body, MsgID: id, Offset: off, Handle: h,
		Invisible: time.Duration(invisible) * time.Millisecond, Start: ms(start), End: ms(end), Attempt: 1})
	return b
}

// attempt sets the delivery attempt of the last event added.
func (b *hist) attempt(n int32) *hist {
	b.h.mu.Lock()
	b.h.events[len(b.h.events)-1].Attempt = n
	b.h.mu.Unlock()
	return b
}

func (b *hist) change(c, h, nh string, d int, o Outcome, start, end int) *hist {
	b.h.Add(Event{Op: Change, Outcome: o, Client: c, Handle: h, NewHandle: nh, Invisible: time.Duration(d) * time.Millisecond, Start: ms(start), End: ms(end)})
	return b
}

func (b *hist) ack(c, h string, o Outcome, start, end int) *hist {
	b.h.Add(Event{Op: Ack, Outcome: o, Client: c, Handle: h, Start: ms(start), End: ms(end)})
	return b
}

var bounds = Bounds{Slack: 100 * time.Millisecond, DelayEarly: 200 * time.Millisecond, Redeliver: 20 * time.Second}

func rules(vs []Violation) []Rule {
	var out []Rule
	for _, v := range vs {
		out = append(out, v.Rule)
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		h    *hist
		end  int // Bounds.End, ms after t0 (0: 60 s)
		want []Rule
	}{
		{"sent, delivered, acked", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", OK, 40, 50), 0, nil},
		{"not acked: redelivered after the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			deliver("c2", "a", "A", 0, "h2", 10000, 9000, 10050).
			ack("c2", "h2", OK, 10100, 10200), 0, nil},
		{"double delivery inside the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			deliver("c2", "a", "A", 0, "h2", 10000, 4000, 5000).
			ack("c2", "h2", OK, 5100, 5200), 0, []Rule{RuleWindow}},
		{"second delivery within the slack", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			deliver("c2", "a", "A", 0, "h2", 10000, 9000, 9950).
			ack("c2", "h2", OK, 10000, 10100), 0, nil},
		{"a window judged from when the receive was asked", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 3000). // a long poll: handed out late
			deliver("c2", "a", "A", 0, "h2", 10000, 9000, 10500).
			ack("c2", "h2", OK, 10600, 10700), 0, nil},
		{"change answered OK lengthens the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 20000, OK, 1000, 1100).
			deliver("c2", "a", "A", 0, "h2", 10000, 14000, 15000).
			ack("c2", "h2", OK, 15100, 15200), 0, []Rule{RuleWindow}},
		{"change answered OK shortens the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 2000, OK, 1000, 1100).
			deliver("c2", "a", "A", 0, "h2", 10000, 3000, 3500).
			ack("c2", "h2", OK, 3600, 3700), 0, nil},
		{"change not answered may have shortened the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "", 2000, Unknown, 1000, 4000).
			deliver("c2", "a", "A", 0, "h2", 10000, 3000, 3500).
			ack("c2", "h2", OK, 3600, 3700), 0, nil},
		{"change not answered cannot lengthen the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "", 30000, Unknown, 1000, 4000).
			deliver("c2", "a", "A", 0, "h2", 10000, 9000, 10500).
			ack("c2", "h2", OK, 10600, 10700), 0, nil},
		{"change refused leaves the window", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "", 1000, Refused, 1000, 1100).
			deliver("c2", "a", "A", 0, "h2", 10000, 3000, 3500).
			ack("c2", "h2", OK, 3600, 3700), 0, []Rule{RuleWindow}},
		{"acked message redelivered", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", OK, 1000, 1100).
			deliver("c2", "a", "A", 0, "h2", 10000, 12000, 12100).
			ack("c2", "h2", OK, 12200, 12300), 0, []Rule{RuleAcked}},
		{"acked with the new handle after a change, redelivered", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 3000, OK, 1000, 1100).
			ack("c1", "h1b", OK, 1200, 1300).
			deliver("c2", "a", "A", 0, "h2", 10000, 5000, 5100).
			ack("c2", "h2", OK, 5200, 5300), 0, []Rule{RuleAcked}},
		{"ack not answered, then redelivered", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", Unknown, 1000, 6000).
			deliver("c2", "a", "A", 0, "h2", 10000, 12000, 12100).
			ack("c2", "h2", OK, 12200, 12300), 0, nil},
		{"redelivered while its ack was under way", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", OK, 9000, 11000).
			deliver("c2", "a", "A", 0, "h2", 10000, 10000, 10100).
			ack("c2", "h2", OK, 12200, 12300), 0, nil},
		{"send answered OK never delivered", new(hist).
			send(Normal, "a", "A", OK, 0, 10), 0, []Rule{RuleLost}},
		{"send not answered, never delivered", new(hist).
			send(Normal, "a", "", Unknown, 0, 3000), 0, nil},
		{"send not answered, delivered", new(hist).
			send(Normal, "a", "", Unknown, 0, 3000).
			deliver("c1", "a", "A", 0, "h1", 10000, 3500, 3600).
			ack("c1", "h1", OK, 3700, 3800), 0, nil},
		{"old handle refused after a change", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 5000, OK, 1000, 1100).
			ack("c1", "h1", Refused, 1200, 1300).
			ack("c1", "h1b", OK, 1400, 1500), 0, nil},
		{"old handle accepted after a change", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 5000, OK, 1000, 1100).
			ack("c1", "h1", OK, 1200, 1300), 0, []Rule{RuleStaleHandle}},
		{"handle of a delivery since redelivered accepted", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			deliver("c2", "a", "A", 0, "h2", 10000, 10000, 10100).
			ack("c1", "h1", OK, 10500, 10600).
			ack("c2", "h2", OK, 10700, 10800), 0, []Rule{RuleStaleHandle}},
		{"overlapping receives: the later attempt asked first", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
			change("c1", "h1", "h1b", 1000, OK, 40, 50).
			deliver("c2", "a", "A", 0, "h3", 10000, 1000, 3000).attempt(3).
			deliver("c3", "a", "A", 0, "h2", 10000, 1001, 1500).attempt(2).
			change("c3", "h2", "h2b", 0, OK, 1600, 1700).
			ack("c2", "h3", OK, 3000, 3100), 0, nil},
		{"overlapping receives hand out the same attempt", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 300).
			deliver("c2", "a", "A", 0, "h2", 10000, 10, 200).
			ack("c1", "h1", OK, 400, 500).
			ack("c2", "h2", OK, 400, 500), 0, []Rule{RuleWindow}},
		{"delivered, never acked, never back", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30), 60000, []Rule{RuleNotRedelivered}},
		{"delivered, never acked, the run ended before it was due back", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			deliver("c1", "a", "A", 0, "h1", 10000, 20, 30), 25000, nil},
		{"a body nobody sent", new(hist).
			deliver("c1", "z", "Z", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", OK, 40, 50), 0, []Rule{RulePhantom}},
		{"an id sent with another body", new(hist).
			send(Normal, "a", "A", OK, 0, 10).
			send(Normal, "b", "B", OK, 0, 10).
			deliver("c1", "b", "A", 0, "h1", 10000, 20, 30).
			ack("c1", "h1", OK, 40, 50).
			deliver("c1", "b", "B", 1, "h2", 10000, 20, 30).
			ack("c1", "h2", OK, 40, 50), 0, []Rule{RulePhantom}},
		{"a send stored twice, both copies out at once", new(hist).
			send(Normal, "a", "A", OK, 0, 3000).
			deliver("c1", "a", "A", 7, "h1", 10000, 3100, 3200).
			deliver("c2", "a", "A", 8, "h2", 10000, 3100, 3200).
			ack("c1", "h1", OK, 3300, 3400).
			ack("c2", "h2", OK, 3300, 3400), 0, nil},
		{"transaction committed and delivered", new(hist).
			txSend("t", "T", true, OK, 0, 10).
			endTx("t", "T", true, OK, 20, 30).
			deliver("c1", "t", "T", 0, "h1", 10000, 25, 40).
			ack("c1", "h1", OK, 50, 60), 0, nil},
		{"transaction committed by check-back and delivered", new(hist).
			txSend("t", "T", true, OK, 0, 10).
			endTx("t", "T", true, Unknown, 20, 3000).
			checkBack("t", "T", true, 6000).
			deliver("c1", "t", "T", 0, "h1", 10000, 6000, 6100).
			ack("c1", "h1", OK, 6200, 6300), 0, nil},
		{"committed transaction never delivered", new(hist).
			txSend("t", "T", true, OK, 0, 10).
			endTx("t", "T", true, OK, 20, 30), 0, []Rule{RuleCommittedLost}},
		{"rolled-back transaction delivered", new(hist).
			txSend("t", "T", false, OK, 0, 10).
			endTx("t", "T", false, OK, 20, 30).
			deliver("c1", "t", "T", 0, "h1", 10000, 40, 50).
			ack("c1", "h1", OK, 60, 70), 0, []Rule{RuleRolledBack}},
		{"rolled-back transaction not delivered", new(hist).
			txSend("t", "T", false, OK, 0, 10).
			endTx("t", "T", false, OK, 20, 30), 0, nil},
		{"commit refused", new(hist).
			txSend("t", "T", true, OK, 0, 10).
			endTx("t", "T", true, Refused, 20, 30).
			checkBack("t", "T", true, 6000).
			deliver("c1", "t", "T", 0, "h1", 10000, 6000, 6100).
			ack("c1", "h1", OK, 6200, 6300), 0, []Rule{RuleEndRefused}},
		{"rollback refused after a check-back committed", new(hist).
			txSend("t", "T", false, OK, 0, 10).
			checkBack("t", "T", true, 10).
			endTx("t", "T", false, Refused, 20, 30).
			deliver("c1", "t", "T", 0, "h1", 10000, 6000, 6100).
			ack("c1", "h1", OK, 6200, 6300), 0, []Rule{RuleRolledBack}},
		{"transaction delivered before its commit", new(hist).
			txSend("t", "T", true, OK, 0, 10).
			deliver("c1", "t", "T", 0, "h1", 10000, 11, 15).
			endTx("t", "T", true, OK, 20, 30).
			ack("c1", "h1", OK, 50, 60), 0, []Rule{RuleUncommitted}},
		{"delayed message on time", new(hist).
			delayed("d", "D", 5000, 0, 10).
			deliver("c1", "d", "D", 0, "h1", 10000, 4000, 4900).
			ack("c1", "h1", OK, 5000, 5100), 0, nil},
		{"delayed message early", new(hist).
			delayed("d", "D", 5000, 0, 10).
			deliver("c1", "d", "D", 0, "h1", 10000, 3000, 3100).
			ack("c1", "h1", OK, 3200, 3300), 0, []Rule{RuleDelayEarly}},
		{"delayed message fired twice", new(hist).
			delayed("d", "D", 5000, 0, 10).
			deliver("c1", "d", "D", 3, "h1", 10000, 5000, 5100).
			ack("c1", "h1", OK, 5200, 5300).
			deliver("c2", "d", "D", 4, "h2", 10000, 5000, 5200).
			ack("c2", "h2", OK, 5300, 5400), 0, []Rule{RuleDelayTwice}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bounds
			b.End = ms(60000)
			if c.end != 0 {
				b.End = ms(c.end)
			}
			vs := Check(c.h.h.Events(), b)
			if got := rules(vs); !reflect.DeepEqual(got, c.want) {
				t.Errorf("rules %v, want %v\n%s", got, c.want, Report(vs, t0, nil))
			}
		})
	}
}

// The report names each violation's rule, message and events, and what
// the context says happened meanwhile.
func TestReport(t *testing.T) {
	h := new(hist).
		send(Normal, "a", "A", OK, 0, 10).
		deliver("c1", "a", "A", 0, "handle-number-one", 10000, 20, 30).
		deliver("c2", "a", "A", 0, "handle-number-two", 10000, 4000, 5000).
		ack("c2", "handle-number-two", OK, 5100, 5200)
	vs := Check(h.h.Events(), Bounds{Slack: 100 * time.Millisecond})
	var asked [2]time.Time
	r := Report(vs, t0, func(_ Violation, from, to time.Time) []string {
		asked = [2]time.Time{from, to}
		return []string{"member 2 leads"}
	})
	for _, want := range []string{"1 violations (inside-window: 1)", "inside-window: message A body \"a\"", "5.02s before the window of the delivery to c1 ended",
		"[+0.020s..+0.030s] deliver OK by c1 id A", "…e-number-one", "[+4.000s..+5.000s] deliver OK by c2", "meanwhile:\n    member 2 leads"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	if asked != [2]time.Time{ms(20), ms(5000)} {
		t.Errorf("context asked for %v, want the span of the events", asked)
	}
	if got := Report(nil, t0, nil); got != "no violations" {
		t.Errorf("empty report %q", got)
	}
}

// Outstanding is what a drain still waits for; Settled when the last
// window or due time has passed.
func TestOutstandingAndSettled(t *testing.T) {
	h := new(hist).
		send(Normal, "a", "A", OK, 0, 10).
		send(Normal, "b", "B", OK, 0, 10).
		send(Normal, "c", "", Unknown, 0, 10).
		txSend("t", "T", true, OK, 0, 10).
		txSend("r", "R", false, OK, 0, 10).
		delayed("d", "D", 30000, 0, 10).
		deliver("c1", "a", "A", 0, "h1", 10000, 20, 30).
		ack("c1", "h1", OK, 40, 50).
		deliver("c1", "b", "B", 1, "h2", 10000, 20, 40).
		change("c1", "h2", "h2b", 15000, OK, 100, 200)
	var got []string
	for _, v := range Outstanding(h.h.Events()) {
		got = append(got, string(v.Rule)+" "+v.Body)
	}
	slices.Sort(got)
	want := []string{"committed-lost t", "lost d", "unacked-not-redelivered b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outstanding %q, want %q", got, want)
	}
	if s := Settled(h.h.Events()); !s.Equal(ms(30000)) {
		t.Errorf("settled at %v, want the delayed message's due time", s.Sub(t0))
	}
	h.ack("c1", "h2b", OK, 300, 400).
		deliver("c1", "d", "D", 0, "h3", 10000, 30000, 30100).
		ack("c1", "h3", OK, 30200, 30300).
		deliver("c1", "t", "T", 0, "h4", 10000, 30000, 30100).
		ack("c1", "h4", Unknown, 30200, 33000).
		endTx("t", "T", true, OK, 20, 30)
	if out := Outstanding(h.h.Events()); len(out) != 0 {
		t.Errorf("outstanding after everything was delivered and acked:\n%s", Report(out, t0, nil))
	}
	if s := Settled(h.h.Events()); !s.Equal(ms(40100)) {
		t.Errorf("settled at %v, want the last delivery's window end", s.Sub(t0))
	}
}
