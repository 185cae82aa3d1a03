package node

import (
	"strings"
	"testing"
	"time"
)

// The remoting send window bounds signed sends: it needs an auth file and
// is not negative.
func TestValidateRemotingSendWindow(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		auth string
		ok   bool
	}{{0, "", true}, {0, "users.yaml", true}, {time.Minute, "users.yaml", true}, {time.Minute, "", false}, {-time.Second, "users.yaml", false}} {
		c := Defaults()
		c.RemotingSendWindow, c.AuthFile = tc.d, tc.auth
		err := c.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s with auth file %q refused: %v", tc.d, tc.auth, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "remoting-send-window")) {
			t.Errorf("%s with auth file %q: error %v, want one naming remoting-send-window", tc.d, tc.auth, err)
		}
	}
}
