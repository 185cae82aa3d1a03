//go:build mqgate_testhooks

package clock

import (
	"testing"
	"time"
)

func TestOffsetClockFromEnv(t *testing.T) {
	for v, want := range map[string]Clock{"": Real{}, "0s": Real{}, "1500ms": Offset{D: 1500 * time.Millisecond}, "-2s": Offset{D: -2 * time.Second}} {
		got, err := offsetClock(v)
		if err != nil || got != want {
			t.Errorf("offsetClock(%q) = %#v, %v; want %#v", v, got, err, want)
		}
	}
	if _, err := offsetClock("soon"); err == nil {
		t.Error("offsetClock(\"soon\") accepted")
	}
}
