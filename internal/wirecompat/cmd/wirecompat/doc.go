// Command wirecompat is TEST TOOLING, not part of mqgate: it compares mqgate's
// generated RocketMQ v2 descriptors (gen/apache/rocketmq/v2) with those of the
// official Go client (github.com/apache/rocketmq-clients/golang/v5/protocol/v2)
// and prints every difference; it exits 1 if there is any, 2 on usage errors.
//
// Both packages register the same proto files in protobuf-go's global
// registry, so this binary only starts with
//
//	GOLANG_PROTOBUF_REGISTRATION_CONFLICT=warn   (or ignore)
//
// in its environment; without it the process panics during init, before main
// runs. internal/wirecompat's tests build and run it that way.
//
// Flags: -json prints the wirecompat.Report (plus additions) as JSON;
// -additions also lists what ours has beyond the official package.
//
// This is the only place in the module allowed to import the official client
// package. It must not be imported (it is a main package) and nothing under
// gateway/, broker/, storage/ or sdk/ may depend on it.
package main
