package testutil

import (
	"fmt"
	"strings"
	"testing"
)

// recordTB records how a helper ended the test.
type recordTB struct {
	testing.TB
	ended string
}

type endTest struct{}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatalf(f string, a ...any) {
	r.ended = "fail: " + fmt.Sprintf(f, a...)
	panic(endTest{})
}
func (r *recordTB) Skipf(f string, a ...any) {
	r.ended = "skip: " + fmt.Sprintf(f, a...)
	panic(endTest{})
}

func ending(f func(t testing.TB)) (ended string) {
	r := &recordTB{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(endTest); !ok {
				panic(v)
			}
		}
		ended = r.ended
	}()
	f(r)
	return ""
}

// A missing system package skips the test with what is missing and how
// to install it, except in CI, where it fails.
func TestCommandSkipsOutsideCIAndFailsInCI(t *testing.T) {
	missing := func(t testing.TB) { Command(t, "the proxy test", "apt-get install nosuch", "mqgate-no-such-command") }
	t.Setenv("CI", "")
	if got := ending(missing); !strings.HasPrefix(got, "skip: ") || !strings.Contains(got, "mqgate-no-such-command is not installed") ||
		!strings.Contains(got, "the proxy test") || !strings.Contains(got, "apt-get install nosuch") {
		t.Fatalf("outside CI: %q", got)
	}
	t.Setenv("CI", "true")
	if got := ending(missing); !strings.HasPrefix(got, "fail: ") || !strings.Contains(got, ".ci/deps") {
		t.Fatalf("in CI: %q", got)
	}
	if got := ending(func(t testing.TB) {
		if p := Command(t, "x", "y", "mqgate-no-such-command", "sh"); !strings.HasSuffix(p, "/sh") {
			panic("found " + p)
		}
	}); got != "" {
		t.Fatalf("an installed command: %q", got)
	}
}
