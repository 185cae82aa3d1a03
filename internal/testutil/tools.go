package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as .ci/run is run),
// where everything .ci/deps installs must be there.
func InCI() bool { return os.Getenv("CI") == "true" }

// Command returns the path of the first of names (commands on PATH, or
// absolute paths) that exists. When none does, a test needs a system
// package that is not installed: it fails in CI, which installs every one
// (.ci/deps), and is skipped elsewhere, saying what is missing, what
// needs it and how to install it.
func Command(t testing.TB, what, install string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Missing(t, names[0]+" is not installed", what, install)
	return ""
}

// Missing fails the test in CI and skips it elsewhere: prerequisite
// (something .ci/deps installs) is missing, what needs it, install says
// how to get it.
func Missing(t testing.TB, prerequisite, what, install string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s, and %s needs it: CI installs it with .ci/deps (%s)", prerequisite, what, install)
	}
	t.Skipf("skipped: %s, and %s needs it (install: %s; or run .ci/deps as root on Debian; with CI=true this fails)", prerequisite, what, install)
}
