// Package delay holds delayed messages until their delivery time, then
// publishes them to their topic (within milliseconds of the due time, by a
// timer on the earliest due message), and cancels them on recall. Pending
// messages survive restarts: they are deferred records (broker/deferred).
//
// It also holds the classic protocol's ready-made records (classic.go):
// delay levels and timer properties of classic producers, and the delayed
// redelivery of CONSUMER_SEND_MSG_BACK into %RETRY%<group>. Every staged
// record goes to the topic its REAL_TOPIC names (and to its REAL_QID when
// it names one) and keeps all its other properties.
//
// Files: delay.go holds the service: the delay system topics, the timer on
// the earliest due message and the publishing of due messages.
//
// delay must not import gen/, gateway/ or other broker services except
// through the interfaces it declares.
package delay
