//go:build !mqgate_testhooks

package clock

// Process is the clock the composition root gives the broker: the system
// clock. A binary built with the mqgate_testhooks tag may shift it
// instead (process_testhooks.go); no other build can.
func Process() Clock { return Real{} }
