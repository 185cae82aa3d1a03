package nemesis

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FaultKind is one kind of fault the nemesis injects.
type FaultKind string

const (
	// Kill: kill -9 a member, and start it again after Hold.
	Kill FaultKind = "kill"
	// Pause: SIGSTOP a member for Hold, then SIGCONT.
	Pause FaultKind = "pause"
	// Partition: cut every raft link to and from a member for Hold.
	Partition FaultKind = "partition"
	// Transfer: hand the leadership to Member.
	Transfer FaultKind = "transfer"
	// Skew: restart Member with its broker's clock shifted by Offset, and
	// hand it the leadership.
	Skew FaultKind = "skew"
	// Move: move a data group's replica from one member to another, the
	// group, the members and the moment chosen by Pick (a cluster whose
	// data groups are on some members only: not in AllFaults).
	Move FaultKind = "move"
)

// AllFaults are the kinds Plan draws from by default.
var AllFaults = []FaultKind{Kill, Pause, Partition, Transfer, Skew}

// weights make kills the commonest fault.
var weights = map[FaultKind]int{Kill: 3, Pause: 2, Partition: 2, Transfer: 2, Skew: 2, Move: 2}

// Fault is one step of a plan.
type Fault struct {
	Kind FaultKind
	// Gap is the quiet time before the fault.
	Gap time.Duration
	// AtLeader aims the fault at whichever member leads when it comes;
	// otherwise at Member (1-based).
	AtLeader bool
	Member   int
	// Hold is how long the fault lasts (Kill: how long the member stays
	// down).
	Hold time.Duration
	// Offset is a Skew's clock offset.
	Offset time.Duration
	// Pick chooses a Move's group and members.
	Pick int
}

func (f Fault) String() string {
	target := fmt.Sprintf("member %d", f.Member)
	if f.AtLeader {
		target = "the leader"
	}
	switch f.Kind {
	case Transfer:
		return fmt.Sprintf("after %v: transfer the leadership to member %d", f.Gap, f.Member)
	case Skew:
		return fmt.Sprintf("after %v: restart member %d with its clock offset by %v and hand it the leadership", f.Gap, f.Member, f.Offset)
	case Move:
		return fmt.Sprintf("after %v: move a replica (pick %d)", f.Gap, f.Pick)
	}
	return fmt.Sprintf("after %v: %s %s for %v", f.Gap, f.Kind, target, f.Hold)
}

// PlanOptions shape a plan.
type PlanOptions struct {
	// Duration is about how long the faults take, gaps included.
	Duration time.Duration
	// Kinds are the faults to draw from (empty: AllFaults).
	Kinds []FaultKind
	// MaxSkew bounds the clock offsets (the initial ones and Skew's); 0
	// leaves the clocks alone, and Skew out.
	MaxSkew time.Duration
	// Members is the group's size (default 3).
	Members int
}

// Plan is a seeded random schedule: the members' clock offsets at start
// (zero unless Skew is among the kinds), and the faults, one at a time.
// The same seed and options give the same plan.
type Plan struct {
	Seed    uint64
	Initial []time.Duration // by member, 0-based
	Faults  []Fault
}

// NewPlan draws a plan from seed.
func NewPlan(seed uint64, o PlanOptions) Plan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if o.Members == 0 {
		o.Members = 3
	}
	var kinds []FaultKind
	skews := false
	total := 0
	asked := o.Kinds
	if len(asked) == 0 {
		asked = AllFaults
	}
	for _, k := range asked {
		if k == Skew && o.MaxSkew <= 0 {
			continue // no skew to inject
		}
		kinds = append(kinds, k)
		total += weights[k]
		skews = skews || k == Skew
	}
	if total == 0 {
		return Plan{Seed: seed, Initial: make([]time.Duration, o.Members)}
	}
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(r.Int64N(int64(hi-lo)+1))).Round(100 * time.Millisecond)
	}
	offset := func() time.Duration {
		return []time.Duration{-o.MaxSkew, -o.MaxSkew / 2, 0, o.MaxSkew / 2, o.MaxSkew}[r.IntN(5)]
	}
	p := Plan{Seed: seed, Initial: make([]time.Duration, o.Members)}
	if skews {
		for i := range p.Initial {
			p.Initial[i] = offset()
		}
	}
	// Each fault costs its gap, its hold and a few seconds of recovery.
	const recovery = 2 * time.Second
	for spent := time.Duration(0); spent < o.Duration; {
		n := r.IntN(total)
		var k FaultKind
		for _, k = range kinds {
			if n < weights[k] {
				break
			}
			n -= weights[k]
		}
		f := Fault{Kind: k, Gap: between(2*time.Second, 5*time.Second), Member: 1 + r.IntN(o.Members)}
		switch k {
		case Kill:
			f.AtLeader = r.IntN(3) < 2
			f.Hold = between(500*time.Millisecond, 4*time.Second)
		case Pause:
			f.AtLeader = r.IntN(3) < 2
			f.Hold = between(1500*time.Millisecond, 6*time.Second)
		case Partition:
			f.AtLeader = r.IntN(2) == 0
			f.Hold = between(2*time.Second, 8*time.Second)
		case Skew:
			for f.Offset == 0 {
				f.Offset = offset()
			}
		case Move:
			f.Pick = r.IntN(1 << 16)
		}
		if f.AtLeader {
			f.Member = 0
		}
		p.Faults = append(p.Faults, f)
		spent += f.Gap + f.Hold + recovery
	}
	return p
}

func (p Plan) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "seed %d; clock offsets at start:", p.Seed)
	for i, o := range p.Initial {
		fmt.Fprintf(&sb, " member %d %v", i+1, o)
	}
	for i, f := range p.Faults {
		fmt.Fprintf(&sb, "\n  %2d. %s", i+1, f)
	}
	return sb.String()
}

// ParseKinds reads a comma-separated list of fault kinds ("kill,pause").
func ParseKinds(s string) ([]FaultKind, error) {
	var out []FaultKind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, ok := weights[FaultKind(f)]; !ok {
			return nil, fmt.Errorf("unknown fault %q (want some of kill, pause, partition, transfer, skew, move)", f)
		}
		out = append(out, FaultKind(f))
	}
	return out, nil
}
