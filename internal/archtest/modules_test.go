package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each client module, built on its own (no go.work), reaches no server
// package and no module only the server needs.
func TestClientModulesStayClientOnly(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range ClientModules {
		t.Run(dir, func(t *testing.T) {
			goList := func(args ...string) []string {
				t.Helper()
				cmd := exec.Command("go", append([]string{"list"}, args...)...)
				cmd.Dir = filepath.Join(root, dir)
				cmd.Env = append(os.Environ(), "GOWORK=off")
				out, err := cmd.Output()
				if err != nil {
					var stderr []byte
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = ee.Stderr
					}
					t.Fatalf("go list %v in %s: %v\n%s", args, dir, err, stderr)
				}
				return strings.Split(strings.TrimSpace(string(out)), "\n")
			}
			pkgs := goList("-deps", "-test", "./...")
			mods := goList("-m", "all")
			if !slices.Contains(pkgs, "google.golang.org/grpc") || !slices.Contains(mods, Module+"/"+dir) {
				t.Fatalf("go list in %s reported neither grpc nor the module itself: the check would be vacuous\n%v\n%v", dir, pkgs, mods)
			}
			for _, v := range CheckClientModule(dir, pkgs, mods) {
				t.Error(v)
			}
		})
	}
}

// The checker catches a server package and each server-only module.
func TestCheckClientModuleCatches(t *testing.T) {
	pkgs := []string{
		"fmt",
		Module + "/sdk",
		Module + "/sdk [" + Module + "/sdk.test]",
		Module + "/sdk_test [" + Module + "/sdk.test]",
		Module + "/gen/apache/rocketmq/v2",
		Module + "/internal/testutil",
		Module + "/broker/model",
		"go.uber.org/zap",
		"github.com/envoyproxy/go-control-plane/envoy/config/core/v3",
	}
	mods := []string{
		Module + "/sdk",
		Module + "/gen v0.0.0-00010101000000-000000000000 => ../gen",
		"google.golang.org/grpc v1.85.0",
		"github.com/envoyproxy/go-control-plane/envoy v1.40.0",
		Module + " v0.0.0-00010101000000-000000000000 => ..",
		"go.etcd.io/raft/v3 v3.7.0",
		"go.uber.org/zap v1.27.1",
		"github.com/chromedp/chromedp v0.23.1",
		"github.com/apache/rocketmq-clients/golang/v5 v5.1.3",
	}
	got := CheckClientModule("sdk", pkgs, mods)
	if len(got) != 9 {
		t.Fatalf("caught %d of 9: %q", len(got), got)
	}
	if v := CheckClientModule("sdk", pkgs[:5], mods[:4]); len(v) != 0 {
		t.Fatalf("allowed dependencies flagged: %q", v)
	}
}
