// Package wirecompat checks that mqgate's own text of the RocketMQ v2 protos
// (gen/apache/rocketmq/v2) is wire-identical to what the official clients
// were generated from.
//
// It owns one comparison, Compare: given two sets of file descriptors, "ours"
// and "theirs", it reports every element of theirs that ours lacks or shapes
// differently. Checked: files (path, package, syntax); messages, nested ones
// and map entries included (declaring file, map-entry flag); fields (number,
// kind, message/enum type, cardinality, oneof membership, proto3 optional,
// JSON name, packed encoding, proto2 defaults); oneofs; enums (declaring
// file, open/closed) and their values (name, number); services (declaring
// file) and methods (input, output, client/server streaming). Ours may add
// anything. Not compared: options other than packed, reserved ranges,
// comments, and extensions (the v2 contract declares none).
//
// Why a separate program: the official package
// github.com/apache/rocketmq-clients/golang/v5/protocol/v2 and ours register
// the same proto paths and full names in protobuf-go's global registry, so a
// binary linking both panics at init unless the environment variable
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT=warn (or ignore) is set before it
// starts. The comparison therefore runs in cmd/wirecompat, which the tests in
// this package build and execute with that variable set. The official package
// is a test-time dependency only: nothing but cmd/wirecompat may import it.
//
// Files: compare.go holds the comparison of two descriptor sets and its
// Diffs.
//
// Imports: the standard library and google.golang.org/protobuf only. This
// package (non-test code) must not import gen/, the official client, or any
// mqgate package; its tests may import gen/apache/rocketmq/v2.
package wirecompat
