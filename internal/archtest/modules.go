package archtest

import (
	"fmt"
	"strings"
)

// ClientModules are the modules a client of mqgate takes: the generated
// API code and the Go SDK. Each has its own go.mod so that a program
// using the SDK does not take the server's dependencies.
var ClientModules = []string{"gen", "sdk"}

// serverOnly are path prefixes of what only the server or its tests use:
// no package of a client module's build (tests included) may come from
// them.
var serverOnly = []string{
	"go.etcd.io/",
	"go.uber.org/zap",
	"github.com/chromedp/",
	"github.com/envoyproxy/",
	"github.com/apache/rocketmq-",
	"go.opentelemetry.io/",
	"github.com/prometheus/",
}

// serverOnlyModules are module path prefixes that may not even be in a
// client module's module graph (grpc's own go.mod names envoy's control
// plane and OpenTelemetry, so those two can only be kept out of the
// packages).
var serverOnlyModules = []string{
	"go.etcd.io/",
	"go.uber.org/zap",
	"github.com/chromedp/",
	"github.com/apache/rocketmq-",
	"github.com/prometheus/",
}

// CheckClientModule returns what is wrong with the dependencies of the
// client module at dir (relative to the repository root): pkgs is `go
// list -deps -test ./...` there, mods is `go list -m all`. No package of
// the server (an mqgate package outside gen/ and the module itself) or of
// serverOnly may appear, nor the server module or one of
// serverOnlyModules in the module graph.
func CheckClientModule(dir string, pkgs, mods []string) []string {
	var out []string
	for _, p := range pkgs {
		p, _, _ = strings.Cut(p, " ") // "pkg [pkg.test]" variants
		p = strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test")
		if r, ok := rel(p); ok && !under(r, "gen") && !under(r, dir) {
			out = append(out, fmt.Sprintf("%s/ module depends on the server package %s", dir, p))
		}
		for _, bad := range serverOnly {
			if strings.HasPrefix(p, bad) {
				out = append(out, fmt.Sprintf("%s/ module depends on %s, which only the server uses", dir, p))
			}
		}
	}
	for _, m := range mods {
		path, _, _ := strings.Cut(m, " ")
		if path == Module {
			out = append(out, fmt.Sprintf("%s/ module requires the server module (%s)", dir, m))
		}
		for _, bad := range serverOnlyModules {
			if strings.HasPrefix(path, bad) {
				out = append(out, fmt.Sprintf("%s/ module's graph holds %s, which only the server uses", dir, m))
			}
		}
	}
	return out
}
