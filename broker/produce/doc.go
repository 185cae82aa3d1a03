// Package produce stores what producers send: it validates each message
// (names, sizes, properties, tags, keys, message group, delivery time,
// message type against the topic's type), picks the queue (hash of the
// message group for FIFO, round robin otherwise; a batch stays in one
// queue; in a cluster of several data groups, among the queues its group
// holds: Config.Placement) and appends through the store, mapping the receipt honestly: a
// flush timeout is reported per message, never as OK. While the store's
// disk is below its reserve (Space, storage's CheckSpace) it refuses a
// send as a whole, before anything of it is stored (KindDiskFull).
//
// Files: produce.go (Send: resolving the topic, the special routes of
// delayed and transactional messages, the append) and validate.go (the
// limits and validation rules a message must pass, with upstream's codes).
//
// produce must not import gen/, gateway/ or other broker services except
// through the interfaces it declares.
package produce
