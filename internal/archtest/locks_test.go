package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lockOrderFile is the one file that lists every lock of the binary,
// what it guards and the order in which locks nest.
const lockOrderFile = "docs/locks.md"

// binaryLocks returns every lock declared in the packages the mqgate
// binary is built from (generated code aside).
func binaryLocks(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Dir}}", Module+"/cmd/mqgate").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var locks []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		r, ok := rel(path)
		if !ok || under(r, "gen") {
			continue
		}
		l, err := CodeLocks(r, dir)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l...)
	}
	return locks
}

// docs/locks.md names every lock of the binary, and no lock the code
// does not have.
func TestLockOrderFileNamesEveryLock(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", lockOrderFile))
	if err != nil {
		t.Fatal(err)
	}
	code := binaryLocks(t)
	if len(code) < 40 {
		t.Fatalf("found only %d locks in the binary's packages: the check would be vacuous", len(code))
	}
	named := DocLocks(string(doc))
	for _, l := range code {
		if !slices.Contains(named, l) {
			t.Errorf("%s does not name the lock %s: say what it guards and where it nests", lockOrderFile, l)
		}
	}
	for _, l := range named {
		if !slices.Contains(code, l) {
			t.Errorf("%s names %s, which the code does not declare", lockOrderFile, l)
		}
	}
}

func TestLockNamesParse(t *testing.T) {
	got := DocLocks("`storage.Store.cpMu` → `storage/commitlog.Log.syncMu` (see `Log.mu`, docs/locks.md, pop.Service)\n" +
		"storage.Store.cpMu → broker/pop.Service.mu (read)\n`internal/clock.Fake.mu`, `x`")
	want := []string{"broker/pop.Service.mu", "internal/clock.Fake.mu", "storage.Store.cpMu", "storage/commitlog.Log.syncMu"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
