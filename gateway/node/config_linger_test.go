package node

import (
	"strings"
	"testing"
	"time"
)

// The staging linger is a short wait: 0 turns it off, negative values and
// values past maxStagingLinger are refused by name.
func TestValidateStagingLinger(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {500 * time.Microsecond, true}, {maxStagingLinger, true}, {-time.Microsecond, false}, {maxStagingLinger + 1, false}} {
		c := Defaults()
		c.StagingLinger = tc.d
		err := c.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s refused: %v", tc.d, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "staging-linger")) {
			t.Errorf("%s: error %v, want one naming staging-linger", tc.d, err)
		}
	}
}
