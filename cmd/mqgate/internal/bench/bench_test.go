package bench

import "testing"

func TestMedianRound(t *testing.T) {
	rd := func(ratio float64) Round { return Round{Ratio: ratio, Echo: &Figures{}} }
	for _, c := range []struct {
		rounds []Round
		want   Round
	}{
		{[]Round{rd(0.9)}, rd(0.9)},
		{[]Round{rd(0.9), rd(0.7), rd(0.8)}, rd(0.8)},
		{[]Round{rd(0.9), rd(0.7), rd(0.8), rd(1.0)}, rd(0.8)},
	} {
		got := medianRound(c.rounds)
		if got.Ratio != c.want.Ratio {
			t.Errorf("medianRound(%v) = %+v, want %+v", c.rounds, got, c.want)
		}
	}
}
