package restmessaging

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundary: restmessaging is an edge like gateway/admin. It never
// imports storage/ or another listener package (internal/archtest checks
// the whole module; this keeps the rule next to the package).
func TestImportBoundary(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/mqgate/mqgate/"
	imports := strings.Fields(string(out))
	if len(imports) == 0 {
		t.Fatal("go list reported no imports: the check would be vacuous")
	}
	for _, p := range imports {
		rel, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		for _, banned := range []string{"storage", "gateway/grpcserver", "gateway/v2service", "gateway/httpserver", "gateway/remoting", "gateway/admin", "gateway/node", "cmd"} {
			if rel == banned || strings.HasPrefix(rel, banned+"/") {
				t.Errorf("restmessaging imports %s", p)
			}
		}
	}
}
