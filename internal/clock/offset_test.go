package clock

import (
	"testing"
	"time"
)

func TestOffsetNow(t *testing.T) {
	for _, d := range []time.Duration{time.Hour, -1500 * time.Millisecond} {
		before := time.Now()
		got := Offset{D: d}.Now()
		after := time.Now()
		if got.Before(before.Add(d)) || got.After(after.Add(d)) {
			t.Errorf("Offset{%v}.Now() = %v, want between %v and %v", d, got, before.Add(d), after.Add(d))
		}
	}
}

// At measures against the clock it is given: on a clock an hour ahead, a
// time 20 ms past that clock's now comes in 20 ms, not in an hour and
// 20 ms; on one an hour behind, not at once.
func TestAtOnOffsetClock(t *testing.T) {
	for _, d := range []time.Duration{time.Hour, -time.Hour} {
		c := Offset{D: d}
		start := time.Now()
		tm := At(c, c.Now().Add(20*time.Millisecond))
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			tm.Stop()
			t.Fatalf("offset %v: At(now+20ms) did not fire within 10 s", d)
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Errorf("offset %v: At(now+20ms) fired after %v", d, el)
		}
	}
}
