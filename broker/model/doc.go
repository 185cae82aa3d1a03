// Package model holds the broker's domain types: topics, consumer groups,
// messages as producers send them and as consumers receive them, and the
// names of the stored system properties. Listeners convert their wire
// types to and from these; the broker never sees a protobuf type.
//
// Files: model.go holds every type: topic types, messages as sent and
// delivered, filters, groups and their retry policies.
//
// model imports only the standard library.
package model
