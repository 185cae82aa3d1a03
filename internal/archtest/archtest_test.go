package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
