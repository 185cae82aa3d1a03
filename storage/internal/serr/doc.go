// Package serr holds the storage error sentinels shared by every storage
// package, so errors.Is works across layers; package storage re-exports
// them.
//
// It must not import anything outside the standard library.
package serr
