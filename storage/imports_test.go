package storage

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundary: storage is the bottom layer. It may import the
// standard library, golang.org/x/sys and its own packages only.
func TestImportBoundary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v %s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(p, "github.com/mqgate/mqgate/storage"),
			strings.HasPrefix(p, "github.com/mqgate/mqgate/internal/"),
			strings.HasPrefix(p, "golang.org/x/sys/"):
		default:
			t.Errorf("storage depends on %s", p)
		}
	}
}
