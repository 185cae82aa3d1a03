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
	if groups <= 1 {
		return 0
	}
	h := uint64(hash(topic))
	if lite || q < 0 {
		return int(h % uint64(groups))
	}
	return int((h + uint64(q)) % uint64(groups))
}

// Of is one group's place among the data groups: Group of Groups. The
// zero Of (one group) holds every queue.
type Of struct {
	Group, Groups int
}

// All reports whether p holds every queue (one group).
func (p Of) All() bool { return p.Groups <= 1 }

// Holds reports whether p holds queue q of topic.
func (p Of) Holds(topic string, lite bool, q int32) bool {
	return p.All() || GroupOf(topic, lite, q, p.Groups) == p.Group
}

// Count is how many of topic's queues 0..queues-1 p holds.
func (p Of) Count(topic string, lite bool, queues int32) int32 {
	if queues <= 0 {
		return 0
	}
	if p.All() {
		return queues
	}
	if lite {
		if GroupOf(topic, true, 0, p.Groups) == p.Group {
			return queues
		}
		return 0
	}
	first := p.first(topic)
	if first >= queues {
		return 0
	}
	return (queues-first-1)/int32(p.Groups) + 1
}

// Nth is the k-th (from 0) of the queues of topic p holds, ascending;
// k must be below Count.
func (p Of) Nth(topic string, lite bool, k int32) int32 {
	if p.All() || lite {
		return k
	}
	return p.first(topic) + k*int32(p.Groups)
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
	g := uint64(p.Groups)
	h := uint64(hash(topic)) % g
	return int32((uint64(p.Group) + g - h) % g)
}
