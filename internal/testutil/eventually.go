package testutil

import (
	"testing"
	"time"
)

// Poll reports whether cond became true within 10 s, checking every 2 ms.
// It is for outcomes a test cannot be told about (a server finishing a
// call asynchronously, a background loop's side effect), not a substitute
// for waiting on a signal the code offers.
func Poll(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// Eventually is Poll that fails the test, naming what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
