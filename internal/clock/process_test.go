//go:build !mqgate_testhooks

package clock

import "testing"

// A binary built without the mqgate_testhooks tag runs on the system
// clock whatever its environment says.
func TestProcessIgnoresOffsetWithoutTag(t *testing.T) {
	t.Setenv("MQGATE_TEST_CLOCK_OFFSET", "1h")
	if c, ok := Process().(Real); !ok {
		t.Fatalf("Process() = %#v, want Real", c)
	}
}
