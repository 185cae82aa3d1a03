// Package offset serves consumers that manage their own progress: Pull
// reads a queue from an offset (long-polling at the end), UpdateOffset and
// GetOffset keep a committed offset per (group, topic, queue) in the
// metadata store, QueryOffset finds the beginning, the end or the first
// offset stored at or after a time. The classic remoting listener uses the
// same service.
//
// Files: offset.go holds the Service: pulls by offset, committed offsets and
// their queries.
//
// offset must not import gen/, gateway/ or other broker services.
package offset
