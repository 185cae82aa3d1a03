// Package forwarding owns how a request one cluster member passes on to
// another is marked and what of its caller's metadata goes with it: the
// caller's own (authentication, client id, language), so that the member
// serving it authenticates the caller again, and the mark that keeps a
// forwarded request from being forwarded again. The v2 service and the
// REST messaging service forward with it.
//
// forwarding imports only grpc and protobuf: it must not import broker/,
// storage/ or a listener package.
package forwarding
