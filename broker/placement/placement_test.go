package placement

import (
	"fmt"
	"slices"
	"testing"
)

// Every queue of a topic is held by exactly the group GroupOf names;
// Count, Nth and Queues agree with Holds; a LITE topic's queues are all
// in one group; one group holds everything; a group below a layout's
// First holds nothing.
func TestPlacement(t *testing.T) {
	for _, l := range []Layout{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {5, 0}, {2, 1}, {3, 1}, {4, 1}, {6, 1}} {
		groups := l.Groups
		for _, topic := range []string{"orders", "audit", "a", "%DLQ%g1", "t-42"} {
			for _, lite := range []bool{false, true} {
				for _, queues := range []int32{0, 1, 2, 3, 8, 17} {
					name := fmt.Sprintf("layout=%+v topic=%s lite=%v queues=%d", l, topic, lite, queues)
					held := map[int32]int{}
					var litegroup = -1
					for g := range max(groups, 1) {
						p := l.Of(g)
						var want []int32
						for q := range queues {
							if p.Holds(topic, lite, q) {
								want = append(want, q)
								held[q]++
								if l.GroupOf(topic, lite, q) != g {
									t.Fatalf("%s: group %d holds %d, GroupOf says %d", name, g, q, l.GroupOf(topic, lite, q))
								}
							}
						}
						if g < l.First && len(want) > 0 {
							t.Fatalf("%s: group %d, below the first holding queues, holds %v", name, g, want)
						}
						if got := p.Queues(topic, lite, queues); !slices.Equal(got, want) && len(got)+len(want) > 0 {
							t.Fatalf("%s: group %d: Queues %v, Holds %v", name, g, got, want)
						}
						if c := p.Count(topic, lite, queues); int(c) != len(want) {
							t.Fatalf("%s: group %d: Count %d, holds %d", name, g, c, len(want))
						}
						if lite && len(want) > 0 {
							if litegroup >= 0 {
								t.Fatalf("%s: a LITE topic's queues in groups %d and %d", name, litegroup, g)
							}
							litegroup = g
						}
					}
					for q := range queues {
						if held[q] != 1 {
							t.Fatalf("%s: queue %d held by %d groups", name, q, held[q])
						}
					}
				}
			}
		}
	}
}

// With at least as many queues as groups, every group holds some queue
// of a topic, so every leader takes a share of its sends; and queues are
// spread evenly (counts differ by one at most).
func TestPlacementSpreads(t *testing.T) {
	for _, l := range []Layout{{2, 0}, {3, 0}, {4, 0}, {3, 1}, {6, 1}} {
		for _, queues := range []int32{int32(l.Groups), 8, 16} {
			lo, hi := queues, int32(0)
			for g := l.First; g < l.Groups; g++ {
				c := l.Of(g).Count("orders", false, queues)
				lo, hi = min(lo, c), max(hi, c)
			}
			if lo == 0 || hi-lo > 1 {
				t.Fatalf("layout %+v, queues %d: counts from %d to %d", l, queues, lo, hi)
			}
		}
	}
}
