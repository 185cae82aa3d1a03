// Package rawdelay holds ready-made records until a due time, then
// publishes them to the topic and queue they name (REAL_TOPIC, REAL_QID).
// It serves the classic remoting protocol: delay levels and timer
// properties of classic producers, and the delayed redelivery of
// CONSUMER_SEND_MSG_BACK into %RETRY%<group>. Unlike broker/delay it keeps
// every property of the record as the classic client sent it (RETRY_TOPIC,
// ORIGIN_MESSAGE_ID, PGROUP, ...), and it always delivers to REAL_TOPIC —
// a retried record carries both REAL_TOPIC (%RETRY%<group>, where it goes)
// and RETRY_TOPIC (where it came from), which broker/delay would confuse.
//
// Pending records survive restarts: they are staged records
// (broker/staged); publishing a record and resolving it is one append.
//
// rawdelay must not import gen/, gateway/ or other broker services except
// through the interfaces it declares.
package rawdelay
