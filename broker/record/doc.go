// Package record maps broker messages to store records and back: which
// system properties carry what (the RocketMQ names, so the remoting
// listener and admin tools read the same records), which property names
// users may not use, and the conversions model.Message → message.Message
// (ToRecord) and message.Message → model.Delivered (FromRecord).
//
// Files: convert.go holds the two conversions, model.Message to a store
// record and a record back to a delivered message.
//
// record imports broker/model and storage/message only.
package record
