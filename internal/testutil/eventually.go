package testutil

import (
	"testing"
	"time"
)

// Eventually waits up to 10 s for cond, checking every 2 ms, and fails the
// test naming what it waited for. It is for outcomes a test cannot be
// told about (a server finishing a call asynchronously, a background
// loop's side effect), not a substitute for waiting on a signal the code
// offers.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
