// Package pop is the POP consumption engine: Receive delivers visible
// messages of a (group, topic) with an invisibility deadline and a receipt
// handle; Ack, ChangeInvisible and ForwardToDLQ act on a delivery by its
// handle; deliveries whose deadline passes come back with their attempt
// incremented, and past the group's max attempts go to %DLQ%<group>.
// FIFO groups get at most one message of a message group in flight.
// Reset moves a group's position in a topic (an admin's offset reset) and
// drops its deliveries in flight there.
//
// State (per group, topic and queue: the fresh-read position and the
// deliveries in flight) lives in memory; every change is appended as a
// record to the system topic JournalTopic, and a periodic snapshot (a
// storage blob) bounds the replay at start. Receipt handles (receipt.go)
// are authenticated with a key kept in the data dir, so they need no
// lookup table and survive restarts.
//
// A topic's deletion is a record in the same log (storage.DeleteTopic;
// replicated like any other in cluster mode), and it is what recovery
// honours: for each topic it asks the store where its last deletion
// record is (Store.LastDeletion), drops the snapshot's subscriptions of
// the topic if the snapshot predates it, and skips the journal records
// below it, so a topic deleted and made again starts as a new topic
// whatever the crash point. A snapshot leaves out the subscriptions made
// before their topic's last deletion (the deletion is in the log before
// the service drops them from memory).
//
// Receives, acks and ChangeInvisible reserve their flights under the
// subscription's lock (marked pending: no other operation hands out,
// redelivers or changes them), append their record with no lock held, and
// then publish the change, or withdraw it if the append failed. A failure
// therefore never rewinds state another operation observed, and the
// records of concurrent operations still reach the store together (one
// record per receive batch; the store's group commit batches them).
// pending.go describes the protocol and how snapshots stay exact.
// Renewals, client releases and offset resets apply their change first
// and record it after (a failed record is logged; a reset is undone as
// far as nothing happened since).
//
// Locking: Service.snapMu (one snapshot at a time) → Service.mu (the
// subs map) → sub.mu → Service.schedMu (the wake-up heap), and sub.mu →
// Service.fence.mu; never the other way round (docs/locks.md). No lock is held
// while appending to the store: what spans an append is the pending mark
// on the flights (and the fence entry), not a lock.
//
// Files: pop.go (the Service: subscriptions, receive, ack,
// change-invisibility, redelivery and dead letters), state.go (a group's
// in-flight deliveries per queue and FIFO message group), pending.go (how a
// change meets the journal), journal.go (the journal records), snapshot.go
// (snapshots of the state and the handle key ring), receipt.go (receipt
// handles), reset.go (offset resets), wake.go (why a parked receive woke).
//
// pop must not import gen/, gateway/ or other broker services; it reaches
// the store through the Store interface.
package pop
