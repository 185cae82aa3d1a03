// Package metadata owns topics and consumer groups: name validation,
// creation (explicit or, when enabled, on first use), lookup and deletion,
// persisted through storage/metastore. It also knows the derived names: the
// dead-letter topic %DLQ%<group>, created on first use with one queue.
// A creation, change or deletion that storage/metastore cannot persist fails
// with KindStoreUnavailable and changes nothing (meta publishes a change
// only once its snapshot is durable), so nothing is accepted for a topic
// or group that a restart would not know. A store whose reads can lag
// changes committed elsewhere (a Syncer: a cluster's catalog) is caught
// up before a change decided on what it holds (a creation, a put that
// keeps the stored fields); one that cannot catch up refuses the change
// as unavailable.
//
// Files: metadata.go holds the service: topic and group create, update,
// delete and lookups, auto-create, and the limits on created resources.
//
// metadata must not import gen/, gateway/ or any other broker service.
package metadata
