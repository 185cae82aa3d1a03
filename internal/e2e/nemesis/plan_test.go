package nemesis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPlanReplaysFromItsSeed(t *testing.T) {
	o := PlanOptions{Duration: 5 * time.Minute, MaxSkew: 1500 * time.Millisecond}
	a, b := NewPlan(42, o), NewPlan(42, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 gave two plans:\n%s\n%s", a, b)
	}
	if c := NewPlan(43, o); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatalf("seeds 42 and 43 gave the same faults:\n%s", a)
	}
	if !strings.HasPrefix(a.String(), "seed 42;") {
		t.Errorf("plan does not start with its seed: %s", a)
	}
}

func TestPlanShape(t *testing.T) {
	o := PlanOptions{Duration: 10 * time.Minute, MaxSkew: time.Second}
	p := NewPlan(7, o)
	seen := map[FaultKind]int{}
	var spent time.Duration
	for _, f := range p.Faults {
		seen[f.Kind]++
		spent += f.Gap + f.Hold
		if f.Gap < 2*time.Second || f.Gap > 5*time.Second {
			t.Errorf("%s: gap out of [2s, 5s]", f)
		}
		if f.AtLeader == (f.Member != 0) {
			t.Errorf("%s: aims at the leader and at member %d", f, f.Member)
		}
		if f.Member < 0 || f.Member > 3 {
			t.Errorf("%s: no such member", f)
		}
		if f.Kind == Skew && (f.Offset < -time.Second || f.Offset > time.Second) {
			t.Errorf("%s: offset beyond the maximum skew", f)
		}
	}
	for _, k := range AllFaults {
		if seen[k] == 0 {
			t.Errorf("no %s fault in a 10-minute plan: %v", k, seen)
		}
	}
	if spent > o.Duration || spent < o.Duration/2 {
		t.Errorf("the faults take %v of a %v plan", spent, o.Duration)
	}

	// Only the kinds asked for; no clock offsets without skew.
	p = NewPlan(7, PlanOptions{Duration: 5 * time.Minute, MaxSkew: time.Second, Kinds: []FaultKind{Kill, Transfer}})
	for _, f := range p.Faults {
		if f.Kind != Kill && f.Kind != Transfer {
			t.Errorf("%s drawn from kill and transfer only", f)
		}
	}
	if !reflect.DeepEqual(p.Initial, []time.Duration{0, 0, 0}) {
		t.Errorf("clock offsets %v without skew faults", p.Initial)
	}

	// No skew at all when the maximum is 0.
	p = NewPlan(7, PlanOptions{Duration: 5 * time.Minute})
	for _, f := range p.Faults {
		if f.Kind == Skew {
			t.Errorf("%s drawn with no skew allowed", f)
		}
	}
	if len(p.Faults) == 0 || !reflect.DeepEqual(p.Initial, []time.Duration{0, 0, 0}) {
		t.Errorf("plan without skew: %s", p)
	}
	if p = NewPlan(7, PlanOptions{Duration: time.Minute, Kinds: []FaultKind{Skew}}); len(p.Faults) != 0 {
		t.Errorf("skew faults with no skew allowed: %s", p)
	}
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds(" kill,skew ,")
	if err != nil || !reflect.DeepEqual(got, []FaultKind{Kill, Skew}) {
		t.Fatalf("ParseKinds = %v, %v", got, err)
	}
	if _, err := ParseKinds("kill,flood"); err == nil || !strings.Contains(err.Error(), `"flood"`) {
		t.Fatalf("ParseKinds(flood): %v", err)
	}
}
