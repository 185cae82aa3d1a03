// Package fuzzseed writes seed-corpus files in the `go test fuzz v1`
// format. Tests call Write when MQGATE_WRITE_SEEDS=1 to regenerate their
// testdata/fuzz/<Target> directories.
//
// It must not import anything outside the standard library.
package fuzzseed
