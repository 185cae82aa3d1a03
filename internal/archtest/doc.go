// Package archtest enforces mqgate's import rules (docs/architecture.md):
// dependencies point one way, cmd → gateway → broker → storage; broker and
// storage never see generated protobuf code; internal/ sits below
// everything; sdk/ depends only on gen/, grpc and protobuf. The rules live
// in rules.go and are checked against `go list` by the test. modules.go
// keeps the client modules (gen/ and sdk/, each with its own go.mod) free
// of the server: no server package in their `go list -deps`, and none of
// the modules only the server uses in their module graph. Its tests also
// keep each package's doc.go naming its bigger files, docs/locks.md naming
// every lock, and each package named as its directory.
//
// It must not import any mqgate package.
package archtest
