package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/internal/testutil"
)

// docs/auth.md, run as written: its users file starts a real mqgate, and
// its signed curl call must answer what it shows; a call signed with
// another secret must not.
func TestDocsAuthExample(t *testing.T) {
	e2e(t)
	requireTools(t, "the examples of docs/auth.md", "bash", "curl", "openssl")
	section := docSection(t, "docs/auth.md", "")
	_, rest, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("docs/auth.md shows no users file")
	}
	users, _, _ := strings.Cut(rest, "```")
	file := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(file, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, testutil.StartOptions{Args: []string{"--auth-file", file}})
	steps := readmeSteps(t, section)
	if checked := runReadmeSteps(t, steps, p.HTTP); checked != 1 {
		t.Fatalf("%d documented commands show their answer, want the one signed call", checked)
	}
	// The same call with a wrong secret is refused.
	var script strings.Builder
	for _, s := range steps {
		script.WriteString(strings.ReplaceAll(strings.ReplaceAll(s.cmd, "localhost:8080", p.HTTP), "SECRET=change-me-ops", "SECRET=wrong") + "\n")
	}
	out, err := exec.Command("bash", "-c", script.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"code":40100`) {
		t.Fatalf("a wrong secret: %v %s", err, out)
	}
}
