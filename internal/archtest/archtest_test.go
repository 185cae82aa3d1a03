package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", Module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	for _, must := range []string{"cmd/mqgate", "gateway/node", "internal/lifecycle", "broker/mqerr"} {
		if _, ok := graph[Module+"/"+must]; !ok {
			t.Fatalf("go list did not report %s: the check would be vacuous", must)
		}
	}
	for _, v := range Check(graph) {
		t.Error(v)
	}
}

// The checker itself must catch each kind of forbidden edge.
func TestCheckCatchesForbiddenEdges(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	bad := map[string][]string{
		m("storage/commitlog"):   {m("broker/pop")},
		m("storage/index"):       {"google.golang.org/protobuf/proto"},
		m("broker/pop"):          {m("gen/apache/rocketmq/v2")},
		m("broker/produce"):      {m("gateway/session")},
		m("gateway/httpserver"):  {m("gateway/grpcserver")},
		m("gateway/grpcserver"):  {m("gateway/v2service")},
		m("gateway/v2service"):   {m("storage/commitlog")},
		m("internal/lifecycle"):  {m("broker/mqerr")},
		m("sdk"):                 {m("broker/mqerr")},
		m("gen/apache/x"):        {m("internal/clock")},
		m("cmd/mqgate"):          {m("storage")},
		m("gateway/grpcserver2"): {m("cmd/mqgate")},
		m("gateway/mcpserver"):   {m("broker")},
		m("gateway/console"):     {m("broker/model")},
	}
	got := Check(bad)
	if len(got) != len(bad) {
		t.Fatalf("caught %d of %d forbidden edges: %v", len(got), len(bad), got)
	}
	good := map[string][]string{
		m("storage/commitlog"):  {m("storage/vfs"), m("internal/clock"), "golang.org/x/sys/unix"},
		m("broker/pop"):         {m("storage"), m("broker/mqerr")},
		m("gateway/grpcserver"): {m("gen/apache/rocketmq/v2"), m("gateway/session"), m("gateway/admission")},
		m("gateway/v2service"):  {m("gateway/grpcserver"), m("broker"), m("storage/message"), m("gateway/admission")},
		m("gateway/node"):       {m("storage"), m("gateway/httpserver")},
		m("cmd/mqgate"):         {m("gateway/node"), m("gen/mqgate/admin/v1")},
		m("gateway/mcpserver"):  {m("gen/mqgate/admin/v1"), m("gateway/auth"), "google.golang.org/grpc"},
		m("sdk"):                {m("gen/apache/rocketmq/v2"), "google.golang.org/grpc", "context"},
	}
	if v := Check(good); len(v) != 0 {
		t.Fatalf("allowed edges flagged: %v", v)
	}
}

// Every package (gen/ aside) says in a doc.go what it owns and what it
// must not import.
func TestEveryPackageHasDocGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		if r, _ := rel(path); under(r, "gen") {
			continue
		}
		n++
		if _, err := os.Stat(filepath.Join(dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go", path)
		}
	}
	if n < 20 {
		t.Fatalf("only %d packages checked", n)
	}
}

// A package is named as its directory (commands and gen/'s versioned
// packages aside), so that an import path says what a reader will find
// in the code that uses it.
func TestPackageNamedAsItsDirectory(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		if r, _ := rel(path); name == "main" || under(r, "gen") {
			continue
		}
		n++
		if base := path[strings.LastIndex(path, "/")+1:]; base != name {
			t.Errorf("%s is package %s: name it %s, or move it", path, name, base)
		}
	}
	if n < 20 {
		t.Fatalf("only %d packages checked", n)
	}
}

// docFileLines is the size from which a file must be named in its
// package's doc.go: a file that big owns something a reader of the
// package needs to find.
const docFileLines = 150

var goFileName = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_]\.go\b`)

// DocGoProblems returns what a package's doc.go gets wrong about its
// files: files (name → line count, tests and doc.go left out) of
// docFileLines lines or more that doc does not name, and file names doc
// mentions (without a directory) that the package does not have.
func DocGoProblems(doc string, files map[string]int) []string {
	var out []string
	mentioned := map[string]bool{}
	for _, m := range goFileName.FindAllString(doc, -1) {
		if strings.Contains(m, "/") {
			continue // another package's file, named by its path
		}
		mentioned[m] = true
		if _, ok := files[m]; !ok && m != "doc.go" && !strings.HasSuffix(m, "_test.go") {
			out = append(out, fmt.Sprintf("doc.go names %s, which the package does not have", m))
		}
	}
	for name, n := range files {
		if n >= docFileLines && !mentioned[name] {
			out = append(out, fmt.Sprintf("doc.go does not say what %s (%d lines) owns", name, n))
		}
	}
	sort.Strings(out)
	return out
}

// Every doc.go says what its package's bigger files own, and names no
// file the package lacks.
func TestDocGoNamesItsFiles(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}} {{join .GoFiles \",\"}}", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue // test files only
		}
		if r, _ := rel(f[0]); under(r, "gen") {
			continue
		}
		doc, err := os.ReadFile(filepath.Join(f[1], "doc.go"))
		if err != nil {
			continue // TestEveryPackageHasDocGo reports it
		}
		files := map[string]int{}
		for _, name := range strings.Split(f[2], ",") {
			if name == "doc.go" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = bytes.Count(b, []byte("\n"))
		}
		checked++
		for _, p := range DocGoProblems(string(doc), files) {
			t.Errorf("%s: %s", f[0], p)
		}
	}
	if checked < 40 {
		t.Fatalf("only %d packages checked", checked)
	}
}

func TestDocGoProblemsCatches(t *testing.T) {
	files := map[string]int{"big.go": 400, "small.go": 20, "edge.go": docFileLines}
	got := DocGoProblems("// big.go owns X; gone.go owns Y; see storage/commitlog/log.go and x_test.go.", files)
	want := []string{"doc.go does not say what edge.go (150 lines) owns", "doc.go names gone.go, which the package does not have"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := DocGoProblems("// big.go and edge.go.", files); len(got) != 0 {
		t.Fatalf("flagged %q", got)
	}
}
