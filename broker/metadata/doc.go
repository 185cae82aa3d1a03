// Package metadata owns topics and consumer groups: name validation,
// creation (explicit or, when enabled, on first use), lookup and deletion,
// persisted through storage/meta. It also knows the derived names: the
// dead-letter topic %DLQ%<group>, created on first use with one queue.
//
// metadata must not import gen/, gateway/ or any other broker service.
package metadata
