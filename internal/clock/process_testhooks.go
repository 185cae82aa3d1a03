//go:build mqgate_testhooks

package clock

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// OffsetEnv names the environment variable a binary built with the
// mqgate_testhooks tag reads at start: a Go duration ("1500ms", "-2s") by
// which its broker's wall clock is shifted. Tests use it to run one
// member of a cluster with a skewed clock; binaries built without the tag
// ignore it.
const OffsetEnv = "MQGATE_TEST_CLOCK_OFFSET"

var process = sync.OnceValue(func() Clock {
	c, err := offsetClock(os.Getenv(OffsetEnv))
	if err != nil {
		panic(err)
	}
	return c
})

// offsetClock is the clock $MQGATE_TEST_CLOCK_OFFSET = v asks for.
func offsetClock(v string) (Clock, error) {
	if v == "" {
		return Real{}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: not a duration: %w", OffsetEnv, v, err)
	}
	if d == 0 {
		return Real{}, nil
	}
	return Offset{D: d}, nil
}

// Process is the clock the composition root gives the broker. This build
// (the mqgate_testhooks tag) shifts it by $MQGATE_TEST_CLOCK_OFFSET when
// set; a malformed value panics at start.
func Process() Clock { return process() }
