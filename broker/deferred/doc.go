// Package deferred keeps messages that are stored now but become visible
// later: delayed messages (until their delivery time) and transactional
// half messages (until commit). A deferred message is a record in a
// system "stage" topic; its resolution (fired, committed, rolled back,
// recalled, discarded) is a record in a system "ops" topic appended
// atomically with whatever the resolution publishes. The set of pending
// messages (a Stage) lives in memory and is rebuilt at start by scanning
// both topics from a persisted low-water time: everything staged before it
// is known to be resolved.
//
// Files: deferred.go holds the whole stage: staged messages, their
// resolution ops and the persisted low-water time; handle.go the tokens
// that name a staged message to clients (transaction ids, recall
// handles), their key rings, and the data group a token's prefix names
// (GroupPrefix, TokenGroup).
//
// deferred must not import gen/, gateway/ or other broker services.
package deferred
