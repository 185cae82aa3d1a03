// Package lifecycle owns the start and stop order of mqgate's components and
// the goroutines they run.
//
// An Owner starts components in registration order and stops them in reverse
// against ONE context whose deadline is fixed by the caller at the first
// shutdown signal: a component can only shorten it, never extend it. The
// result of a shutdown is a Report that says, per component, whether it
// stopped cleanly, timed out or failed, and which goroutines were still
// running.
//
// A Group owns goroutines: Go refuses to spawn once shutdown has begun, and
// Shutdown cancels the group context and waits for every goroutine until the
// deadline.
//
// Files: owner.go (the Owner: components started in order, stopped in
// reverse, the shutdown report) and group.go (the Group of background
// goroutines).
//
// lifecycle sits below everything: it must not import any other mqgate
// package (only the standard library).
package lifecycle
