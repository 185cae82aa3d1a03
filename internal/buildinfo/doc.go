// Package buildinfo says which build of mqgate is running: the module
// version, VCS revision and dirty flag the Go toolchain stamped into the
// binary (runtime/debug.ReadBuildInfo), with a version given at link
// time (-ldflags "-X main.version=...") taking precedence. buildinfo.go
// owns Info, Read and their formatting.
//
// It imports only the standard library.
package buildinfo
