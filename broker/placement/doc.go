// Package placement is where a topic's queues live in a cluster of
// several data groups (gateway/node's cluster mode with --data-groups):
// queue q of topic t lives in group (fnv32a(t) + q) mod G, and every
// queue of a LITE topic in group fnv32a(t) mod G (a lite consumer
// receives from every queue of its parent). It is computed from the
// names alone, so the listeners route a request and each group's broker
// picks its own queues without asking anyone; it never changes for a
// queue, since G is fixed when the cluster is created.
//
// With one group (the zero Of, or Groups ≤ 1) every queue is the group's.
// A Layout with First 1 (a cluster whose data groups have replicas on
// some members only, group 0 keeping only the catalog) spreads the
// queues over groups 1 to G-1 in the same way: group 1 + (fnv32a(t) + q)
// mod (G-1).
//
// placement imports nothing of mqgate: the broker's services and the
// listeners both use it.
package placement
