// Package txn keeps transactional half messages invisible until the
// producer commits them (published to their topic) or rolls them back.
// When neither comes in time, it asks a live producer of the topic through
// the CheckBackSender port (implemented by the gateway's sessions over
// Telemetry) and discards the message after MaxChecks unanswered checks.
// Half messages survive restarts: they are deferred records (broker/deferred).
//
// Files: txn.go holds the service: half messages, commit and rollback, and
// the check-backs of orphaned transactions.
//
// txn must not import gen/, gateway/ or other broker services except
// through the interfaces it declares.
package txn
