// Package mqerr is mqgate's error vocabulary: every error that leaves the
// broker carries a Kind, and each listener (gRPC, REST, remoting) maps Kinds
// to its protocol's codes in exactly one table.
//
// Messages say what was wrong and which name or limit was involved; they
// never contain message bodies, credentials or whole receipt handles.
//
// Files: mqerr.go holds the Kinds, the Error type and the helpers that wrap
// and classify.
//
// mqerr imports only the standard library; it must not import gen/, grpc or
// any other mqgate package.
package mqerr
