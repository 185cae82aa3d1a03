package placement

// hash is the 32-bit FNV-1a of a topic name.
func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// GroupOf is the group, among groups, holding queue q of topic (lite:
// a LITE topic). With groups ≤ 1 it is 0.
func GroupOf(topic string, lite bool, q int32, groups int) int {
	return Layout{Groups: groups}.GroupOf(topic, lite, q)
}

// Layout is how a cluster's queues are spread over its data groups: over
// groups First to Groups-1 (the groups below First hold no queue: a
// cluster whose group 0 holds only the catalog has First 1).
type Layout struct {
	Groups, First int
}

// spread is how many groups hold queues.
func (l Layout) spread() int { return max(l.Groups-l.First, 1) }

// GroupOf is the group holding queue q of topic (lite: a LITE topic).
func (l Layout) GroupOf(topic string, lite bool, q int32) int {
	n := l.spread()
	if n <= 1 {
		return l.First
	}
	h := uint64(hash(topic))
	if lite || q < 0 {
		return l.First + int(h%uint64(n))
	}
	return l.First + int((h+uint64(q))%uint64(n))
}

// Of is group g's place in l.
func (l Layout) Of(g int) Of { return Of{Group: g, Groups: l.Groups, First: l.First} }

// Of is one group's place among the data groups: Group of Groups, queues
// spread from group First on (Layout). The zero Of (one group) holds
// every queue.
type Of struct {
	Group, Groups, First int
}

// Layout is the layout p is a place in.
func (p Of) Layout() Layout { return Layout{Groups: p.Groups, First: p.First} }

// All reports whether p holds every queue (one group).
func (p Of) All() bool { return p.Groups <= 1 }

// none reports whether p holds no queue at all (a group below First).
func (p Of) none() bool { return !p.All() && p.Group < p.First }

// Holds reports whether p holds queue q of topic.
func (p Of) Holds(topic string, lite bool, q int32) bool {
	return p.All() || p.Layout().GroupOf(topic, lite, q) == p.Group
}

// Count is how many of topic's queues 0..queues-1 p holds.
func (p Of) Count(topic string, lite bool, queues int32) int32 {
	if queues <= 0 {
		return 0
	}
	if p.All() {
		return queues
	}
	if p.none() {
		return 0
	}
	if lite || p.Layout().spread() <= 1 {
		if p.Layout().GroupOf(topic, true, 0) == p.Group {
			return queues
		}
		return 0
	}
	first := p.first(topic)
	if first >= queues {
		return 0
	}
	return (queues-first-1)/int32(p.Layout().spread()) + 1
}

// Nth is the k-th (from 0) of the queues of topic p holds, ascending;
// k must be below Count.
func (p Of) Nth(topic string, lite bool, k int32) int32 {
	if p.All() || lite || p.Layout().spread() <= 1 {
		return k
	}
	return p.first(topic) + k*int32(p.Layout().spread())
}

// Queues lists the queues of topic p holds, ascending.
func (p Of) Queues(topic string, lite bool, queues int32) []int32 {
	n := p.Count(topic, lite, queues)
	out := make([]int32, n)
	for k := range n {
		out[k] = p.Nth(topic, lite, k)
	}
	return out
}

// first is the lowest queue id of a non-LITE topic that p holds (it may
// be past the topic's queues).
func (p Of) first(topic string) int32 {
	n := uint64(p.Layout().spread())
	h := uint64(hash(topic)) % n
	return int32((uint64(p.Group-p.First) + n - h) % n)
}
