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
// deliveries in flight) lives in memory and every change is first applied
// there, then appended as a record to the system topic JournalTopic; a
// periodic snapshot (a storage blob) bounds the replay at start. Receipt
// handles (receipt.go) are authenticated with a key kept in the data dir,
// so they need no lookup table and survive restarts.
//
// Locking: Service.mu (the subs map) → sub.mu → Service.schedMu; never the
// other way round. No lock is held while appending to the store.
//
// pop must not import gen/, gateway/ or other broker services; it reaches
// the store through the Store interface.
package pop
