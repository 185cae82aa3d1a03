// Package delay holds delayed messages until their delivery time, then
// publishes them to their topic (within milliseconds of the due time, by a
// timer on the earliest due message), and cancels them on recall. Pending
// messages survive restarts: they are staged records (broker/staged).
//
// delay must not import gen/, gateway/ or other broker services except
// through the interfaces it declares.
package delay
