// Package lite serves lite topics: any number of short-lived destinations
// multiplexed onto one parent topic of type LITE, each consumed in order by
// the lite consumers that subscribe to it.
//
// # Storage
//
// A lite message is an ordinary record of its parent topic, in the parent
// queue its lite topic hashes to, carrying the lite topic's name
// (record.PropLiteTopic). So a lite topic lives with its parent's queues:
// the commit log holds it, replication and crash recovery treat it like
// any message, and nothing is stored per lite topic.
//
// What this package keeps in memory is derived from the log: per parent, a
// map from lite topic name to the lite topic's retained messages (parent
// queue offset, log position, size, store second: 24 bytes each) and, per
// consumer group that consumed it, its progress. A lite topic costs memory
// only once a message names it; messages every consuming group has
// acknowledged are dropped from memory. Open rebuilds the index by reading
// the LITE parents' queues, and the journal topic (JournalTopic: one
// record per acknowledgement that moved a group's position) gives back
// each group's position, so the state survives a crash and is the same on
// every member of a replica group.
//
// # Order and delivery
//
// A lite topic is delivered in order per group: a receive takes a run of
// consecutive messages of a lite topic, and the next run of that lite
// topic goes out only when every message of the run is acknowledged, or
// the run's invisibility expires (then the unacknowledged messages go out
// again, attempt + 1; a change of invisibility with suspend set does not
// count an attempt). Auto-renewed runs (push consumers) stay with their
// client until it acknowledges them or goes away (ReleaseClient).
//
// # Subscriptions and expiry
//
// A client's lite subscription (SyncLiteSubscription: add, remove, the
// full set) is kept in memory, as upstream does: clients send their full
// set every 30 s. A lite topic whose newest message is older than its
// parent's lite TTL expires: it is dropped, and every client subscribed to
// it is told (the Unsubscribed hook). The rule depends on store times only
// (a gap longer than the TTL between two messages starts a new lite topic
// of the same name), so rebuilding from the log gives the same answer.
//
// Files: lite.go (the Service: the lite topics of each LITE parent,
// delivery, acks and expiry), index.go (the in-memory index of lite topics
// rebuilt from the log), subs.go (client subscriptions and their quotas),
// handle.go (lite receipt handles), journal.go (the acknowledgement
// journal), view.go (backlog and listings for operators).
//
// lite must not import gen/, grpc, protobuf or any gateway package.
package lite
