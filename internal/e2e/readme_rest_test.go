package e2e

// The curl examples of docs/rest.md's "## Walkthrough", run as written
// (with the port of a real mqgate substituted) by bash, curl and jq; each
// command followed by a "# → ANSWER" comment must answer that (see
// matchAnswer), so the document cannot rot.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/internal/testutil"
)

// readmeStep is one logical command of a document and the answer shown
// for it ("" when none).
type readmeStep struct {
	cmd, want string
}

// requireTools skips the test (fails it in CI) when a command the
// documents' examples run is missing (.ci/deps installs them).
func requireTools(t *testing.T, what string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testutil.Command(t, what, "Debian: apt-get install "+tool, tool)
	}
}

// docSection is the text of the section titled "## heading" of the
// document at path (relative to the repository root), or the whole
// document when heading is empty.
func docSection(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	if heading == "" {
		return string(b)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("%s has no ## %s section", path, heading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// readmeSteps extracts the sh code blocks of a document's text.
func readmeSteps(t *testing.T, section string) []readmeStep {
	t.Helper()
	var steps []readmeStep
	in := false
	var pending string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if pending != "" {
			pending += "\n" + line
		} else {
			pending = line
		}
		if strings.HasSuffix(line, "\\") {
			continue
		}
		l := strings.TrimSpace(pending)
		pending = ""
		switch {
		case strings.HasPrefix(l, "# → "):
			if len(steps) == 0 || steps[len(steps)-1].want != "" {
				t.Fatalf("documented answer %q follows no command", l)
			}
			steps[len(steps)-1].want = strings.TrimPrefix(l, "# → ")
		case l == "" || strings.HasPrefix(l, "#"):
		default:
			steps = append(steps, readmeStep{cmd: l})
		}
	}
	return steps
}

func TestDocsRESTWalkthrough(t *testing.T) {
	e2e(t)
	requireTools(t, "the REST walkthrough", "bash", "curl", "jq")
	steps := readmeSteps(t, docSection(t, "docs/rest.md", "Walkthrough"))
	all := ""
	for _, s := range steps {
		all += s.cmd + "\n"
	}
	// The examples the walkthrough must keep showing.
	for _, must := range []string{"/v1/topics -d", "/v1/groups -d", "/messages", ":receive", ":changeInvisibleDuration", ":ack"} {
		if !strings.Contains(all, must) {
			t.Errorf("the REST walkthrough lost its %q command", must)
		}
	}
	p := start(t, startOpts())
	if checked := runReadmeSteps(t, steps, p.HTTP); checked < 5 {
		t.Fatalf("only %d documented commands show their answer", checked)
	}
}

// runReadmeSteps runs steps as one bash script against the HTTP port
// addr (for localhost:8080) and checks each shown answer; it returns how
// many answers it checked.
func runReadmeSteps(t *testing.T, steps []readmeStep, addr string) int {
	t.Helper()
	out := t.TempDir()
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	checked := 0
	for i, s := range steps {
		cmd := strings.ReplaceAll(s.cmd, "localhost:8080", addr)
		if s.want == "" {
			script.WriteString(cmd + "\n")
			continue
		}
		checked++
		fmt.Fprintf(&script, "__answer=$(%s)\nprintf '%%s' \"$__answer\" > %q\n", cmd, filepath.Join(out, fmt.Sprint(i)))
	}
	run := exec.Command("bash", "-c", script.String())
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the documented examples failed: %v\n%s\nscript:\n%s", err, b, script.String())
	}
	for i, s := range steps {
		if s.want == "" {
			continue
		}
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := matchAnswer(string(got), s.want); err != nil {
			t.Errorf("documented command\n  %s\nanswered\n  %s\nbut the document shows\n  %s\n%v", s.cmd, got, s.want, err)
		}
	}
	return checked
}

// trailer is what curl -w adds after the JSON (" HTTP 404").
var trailer = regexp.MustCompile(`\s+(HTTP \d{3})\s*$`)

// matchAnswer checks got against the documented answer: the same JSON, where
// objects may have more fields than shown, arrays have exactly the shown
// elements, and "…" inside a string stands for any text; an " HTTP nnn"
// trailer must match exactly.
func matchAnswer(got, want string) error {
	gt, wt := "", ""
	if m := trailer.FindStringSubmatchIndex(want); m != nil {
		wt, want = want[m[2]:m[3]], want[:m[0]]
	}
	if m := trailer.FindStringSubmatchIndex(got); m != nil {
		gt, got = got[m[2]:m[3]], got[:m[0]]
	}
	if gt != wt {
		return fmt.Errorf("status %q, the document shows %q", gt, wt)
	}
	var g, w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("the documented answer is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Errorf("the answer is not JSON: %v", err)
	}
	return matchJSON("$", g, w)
}

func matchJSON(path string, g, w any) error {
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v is not an object", path, g)
		}
		for k, wv := range w {
			gv, ok := gm[k]
			if !ok {
				return fmt.Errorf("%s.%s is missing", path, k)
			}
			if err := matchJSON(path+"."+k, gv, wv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		ga, ok := g.([]any)
		if !ok || len(ga) != len(w) {
			return fmt.Errorf("%s: %v, want %d elements", path, g, len(w))
		}
		for i := range w {
			if err := matchJSON(fmt.Sprintf("%s[%d]", path, i), ga[i], w[i]); err != nil {
				return err
			}
		}
		return nil
	case string:
		gs, ok := g.(string)
		if !ok || !matchEllipsis(gs, w) {
			return fmt.Errorf("%s: %v, want %q", path, g, w)
		}
		return nil
	default:
		if fmt.Sprint(g) != fmt.Sprint(w) {
			return fmt.Errorf("%s: %v, want %v", path, g, w)
		}
		return nil
	}
}

// matchEllipsis matches s against pattern, where "…" is any text.
func matchEllipsis(s, pattern string) bool {
	parts := strings.Split(pattern, "…")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
