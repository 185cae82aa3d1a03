package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mqgate/mqgate/gateway/node"
	"github.com/mqgate/mqgate/internal/testutil"
)

// needBinary skips in -short mode (building mqgate takes a while).
func needBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the mqgate binary")
	}
	return testutil.Binary(t)
}

// printConfig runs `mqgate serve <args> --print-config` and returns the
// effective settings.
func printConfig(t *testing.T, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(needBinary(t), append(append([]string{"serve"}, args...), "--print-config")...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mqgate serve %s --print-config: %v\n%s", strings.Join(args, " "), err, out)
	}
	var m map[string]string
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatalf("print-config output: %v\n%s", err, out)
	}
	return m
}

// cleanEnv is the environment without MQGATE_* settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MQGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// yamlDocs decodes every document of a multi-document YAML file.
func yamlDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, name)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a decoded YAML tree: keys for maps, ints for lists.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a mapping at %v", path[:i+1], k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: not a list with element %d", path[:i+1], k)
			}
			v = l[k]
		}
	}
	return v
}

func asInt(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(int)
	if !ok {
		t.Fatalf("%v (%T) is not an integer", v, v)
	}
	return n
}

// The Kubernetes manifests parse, and their ports, probes and timeouts
// agree with the binary: the ConfigMap's configuration loads, the grace
// period is above its shutdown deadline, the container and Service ports
// are the configured listeners.
func TestKubernetesManifests(t *testing.T) {
	docs := yamlDocs(t, "k8s/mqgate.yaml")
	byKind := map[string][]map[string]any{}
	for _, d := range docs {
		k, _ := d["kind"].(string)
		byKind[k] = append(byKind[k], d)
	}
	if len(byKind["StatefulSet"]) != 1 || len(byKind["ConfigMap"]) != 1 || len(byKind["Service"]) == 0 {
		t.Fatalf("want one StatefulSet, one ConfigMap and Services; got %v", func() map[string]int {
			m := map[string]int{}
			for k, v := range byKind {
				m[k] = len(v)
			}
			return m
		}())
	}
	def := node.Defaults()
	cfgText, _ := get(t, byKind["ConfigMap"][0], "data", "mqgate.yaml").(string)
	var cfg map[string]string
	if err := yaml.Unmarshal([]byte(cfgText), &cfg); err != nil {
		t.Fatalf("ConfigMap mqgate.yaml: %v", err)
	}
	shutdown := def.ShutdownTimeout
	if v, ok := cfg["shutdown-timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		shutdown = d
	}
	addr := func(key, dflt string) int {
		a := dflt
		if v, ok := cfg[key]; ok {
			a = v
		}
		return defaultPortInt(t, a)
	}
	wantPorts := map[string]int{
		"grpc":     addr("grpc-addr", def.GRPCAddr),
		"http":     addr("http-addr", def.HTTPAddr),
		"remoting": addr("remoting-addr", def.RemotingAddr),
	}
	for name, p := range map[string]string{"grpc": def.GRPCAddr, "http": def.HTTPAddr, "remoting": def.RemotingAddr} {
		if wantPorts[name] != defaultPortInt(t, p) {
			t.Errorf("the ConfigMap moves %s from the default port %s to %d: keep the defaults", name, p, wantPorts[name])
		}
	}

	ss := byKind["StatefulSet"][0]
	pod := get(t, ss, "spec", "template", "spec")
	grace := asInt(t, get(t, pod, "terminationGracePeriodSeconds"))
	if time.Duration(grace)*time.Second <= shutdown+2*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d is not above the shutdown deadline %s (plus exit slack)", grace, shutdown)
	}
	c := get(t, pod, "containers", 0)
	ports := map[string]int{}
	for _, p := range get(t, c, "ports").([]any) {
		ports[get(t, p, "name").(string)] = asInt(t, get(t, p, "containerPort"))
	}
	for name, want := range wantPorts {
		if ports[name] != want {
			t.Errorf("container port %s = %d, mqgate listens on %d", name, ports[name], want)
		}
	}
	// Prometheus scrapes the metrics listener, which binds beyond loopback.
	metricsPort := addr("metrics-addr", def.MetricsAddr)
	if ports["metrics"] != metricsPort {
		t.Errorf("container port metrics = %d, mqgate serves /metrics on %d", ports["metrics"], metricsPort)
	}
	ann := get(t, ss, "spec", "template", "metadata", "annotations")
	if p := get(t, ann, "prometheus.io/port"); p != strconv.Itoa(metricsPort) || get(t, ann, "prometheus.io/path") != "/metrics" {
		t.Errorf("Prometheus scrape annotations %v: want port %d, path /metrics", ann, metricsPort)
	}
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		g, ok := get(t, c, probe, "grpc").(map[string]any)
		if !ok {
			t.Errorf("%s is not a gRPC probe", probe)
			continue
		}
		if asInt(t, g["port"]) != wantPorts["grpc"] {
			t.Errorf("%s probes port %v, gRPC is on %d", probe, g["port"], wantPorts["grpc"])
		}
	}
	if s := get(t, c, "readinessProbe", "grpc", "service"); s != "apache.rocketmq.v2.MessagingService" {
		t.Errorf("readiness probe service %v: want the MessagingService health (NOT_SERVING while draining)", s)
	}
	// Liveness must not fail for a whole drain.
	lp := get(t, c, "livenessProbe")
	if tolerance := time.Duration(asInt(t, get(t, lp, "periodSeconds"))*asInt(t, get(t, lp, "failureThreshold"))) * time.Second; tolerance <= shutdown {
		t.Errorf("liveness gives up after %s, within a drain of up to %s", tolerance, shutdown)
	}
	// Data dir on the per-pod volume.
	dataDir := def.DataDir
	if v, ok := cfg["data-dir"]; ok {
		dataDir = v
	}
	claim := get(t, ss, "spec", "volumeClaimTemplates", 0, "metadata", "name")
	mounted := false
	for _, m := range get(t, c, "volumeMounts").([]any) {
		if get(t, m, "name") == claim && get(t, m, "mountPath") == dataDir {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the volume claim %v is not mounted at the data dir %s", claim, dataDir)
	}
	if get(t, pod, "securityContext", "runAsNonRoot") != true || get(t, c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Error("the pod must run as non-root with a read-only root filesystem")
	}
	if _, ok := get(t, c, "resources", "requests", "memory").(string); !ok {
		t.Error("no memory request")
	}
	for _, svc := range byKind["Service"] {
		for _, p := range get(t, svc, "spec", "ports").([]any) {
			name, _ := get(t, p, "name").(string)
			if want, ok := wantPorts[name]; !ok || asInt(t, get(t, p, "port")) != want || get(t, p, "targetPort") != name {
				t.Errorf("Service %v port %v: want port %d targeting the container port %q", get(t, svc, "metadata", "name"), p, want, name)
			}
		}
	}

	// The ConfigMap is a configuration mqgate accepts.
	f := filepath.Join(t.TempDir(), "mqgate.yaml")
	if err := os.WriteFile(f, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	got := printConfig(t, "--config", f)
	if got["shutdown-timeout"] != shutdown.String() {
		t.Errorf("effective shutdown-timeout %q, the manifests assume %s", got["shutdown-timeout"], shutdown)
	}
	// A pod is dialed on its pod IP: the listeners must bind every
	// interface, which needs auth or the explicit opt-out.
	if got["auth-file"] == "" && got["insecure-listen-all"] != "true" {
		t.Error("the ConfigMap neither sets auth-file nor insecure-listen-all: mqgate would listen on loopback only")
	}
}

func defaultPortInt(t *testing.T, addr string) int { return int(defaultPort(t, addr)) }

// unitFile parses a systemd unit: section → key → values (keys repeat).
func unitFile(t *testing.T, name string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, name)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.TrimSpace(k) == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", name, n, line)
			}
			k = strings.TrimSpace(k)
			out[section][k] = append(out[section][k], strings.TrimSpace(v))
		}
	}
	return out
}

// The systemd unit parses (and systemd-analyze, when installed, finds no
// unknown keys), stops within a TimeoutStopSec above the shutdown deadline,
// runs a command line the binary accepts, and is hardened.
func TestSystemdUnit(t *testing.T) {
	const name = "systemd/mqgate.service"
	u := unitFile(t, name)
	svc := u["Service"]
	if svc == nil || u["Unit"] == nil || u["Install"] == nil {
		t.Fatalf("sections %v: want Unit, Service and Install", u)
	}
	one := func(k string) string {
		if len(svc[k]) != 1 {
			t.Fatalf("[Service] %s appears %d times, want once", k, len(svc[k]))
		}
		return svc[k][0]
	}
	stop, err := strconv.Atoi(one("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	if def := node.Defaults().ShutdownTimeout; time.Duration(stop)*time.Second <= def+2*time.Second {
		t.Errorf("TimeoutStopSec=%d is not above the shutdown deadline %s", stop, def)
	}
	if one("KillSignal") != "SIGTERM" {
		t.Error("mqgate drains on SIGTERM")
	}
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "DynamicUser": "yes", "CapabilityBoundingSet": "", "RestrictNamespaces": "yes",
		"MemoryDenyWriteExecute": "yes", "StateDirectory": "mqgate",
	} {
		if got := one(k); got != want {
			t.Errorf("[Service] %s=%q, want %q", k, got, want)
		}
	}
	argv := strings.Fields(one("ExecStart"))
	if len(argv) < 2 || filepath.Base(argv[0]) != "mqgate" || argv[1] != "serve" {
		t.Fatalf("ExecStart %v: want mqgate serve ...", argv)
	}
	// The data dir is the StateDirectory.
	if !strings.Contains(one("ExecStart"), "--data-dir /var/lib/"+one("StateDirectory")) {
		t.Errorf("ExecStart does not put the data dir in the StateDirectory")
	}
	if testing.Short() {
		return
	}
	// The command line is one the binary accepts (the config file swapped
	// for the example, which the test below checks on its own).
	args := argv[2:]
	for i := range args {
		if args[i] == "/etc/mqgate/mqgate.yaml" {
			args[i] = "mqgate.example.yaml"
		}
	}
	printConfig(t, args...)

	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		dir := t.TempDir()
		unit := strings.Replace(string(readFile(t, name)), argv[0], testutil.Binary(t), 1)
		path := filepath.Join(dir, "mqgate.service")
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(sa, "verify", path).CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "mqgate.service") && (strings.Contains(l, "Unknown") || strings.Contains(l, "Invalid") ||
				strings.Contains(l, "Failed") || strings.Contains(l, "ignoring")) {
				t.Errorf("systemd-analyze verify: %s", l)
			}
		}
	} else {
		t.Log("systemd-analyze not installed: unit checked by the parser above only")
	}
}

// The example configuration names every setting, loads with
// --print-config, and shows the binary's defaults (data-dir aside).
func TestExampleConfig(t *testing.T) {
	var keys map[string]any
	if err := yaml.Unmarshal(readFile(t, "mqgate.example.yaml"), &keys); err != nil {
		t.Fatal(err)
	}
	defaults := printConfig(t)
	example := printConfig(t, "--config", "mqgate.example.yaml")
	for k := range defaults {
		if _, ok := keys[k]; !ok {
			t.Errorf("mqgate.example.yaml lacks the setting %q", k)
		}
	}
	for k := range keys {
		if _, ok := defaults[k]; !ok {
			t.Errorf("mqgate.example.yaml has %q, which is not a setting", k)
		}
	}
	for k, v := range defaults {
		if k != "data-dir" && example[k] != v {
			t.Errorf("mqgate.example.yaml sets %s to %q; the default is %q (the example documents defaults)", k, example[k], v)
		}
	}
}

// The Dockerfile builds in a Go image matching go.mod, copies a static
// binary into a non-root final stage, exposes the default ports; its build
// command, run here, yields a static binary with the version stamped.
func TestDockerfile(t *testing.T) {
	text := string(readFile(t, "Dockerfile"))
	var froms, users, exposes, runs []string
	var cmdArgs []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, strings.Join(f[1:], " "))
		case "USER":
			users = append(users, f[1])
		case "EXPOSE":
			exposes = append(exposes, f[1:]...)
		case "RUN":
			runs = append(runs, strings.Join(f[1:], " "))
		case "CMD":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), f[0]))), &cmdArgs); err != nil {
				t.Fatalf("CMD %q: want the JSON (exec) form: %v", l, err)
			}
		}
	}
	if len(froms) < 2 || !strings.Contains(froms[0], " AS build") {
		t.Fatalf("FROM lines %v: want a multi-stage build with a named build stage", froms)
	}
	gomod := string(readFile(t, "../go.mod"))
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	if m == nil || !strings.HasPrefix(froms[0], "golang:"+m[1]) {
		t.Errorf("build stage %q does not use Go %v from go.mod", froms[0], m)
	}
	final := froms[len(froms)-1]
	if !strings.Contains(final, "distroless/static") && !strings.HasPrefix(final, "scratch") {
		t.Errorf("final stage %q: want a static base (distroless/static or scratch)", final)
	}
	if len(users) != 1 || strings.HasPrefix(users[0], "0") || strings.HasPrefix(users[0], "root") {
		t.Errorf("USER %v: want one non-root user", users)
	}
	def := node.Defaults()
	for _, a := range []string{def.GRPCAddr, def.HTTPAddr, def.RemotingAddr} {
		p := strconv.Itoa(defaultPortInt(t, a))
		found := false
		for _, e := range exposes {
			found = found || e == p
		}
		if !found {
			t.Errorf("EXPOSE %v lacks the default port %s", exposes, p)
		}
	}
	// The default command serves, reachable from outside the container
	// (every interface: auth or the explicit opt-out), and exposes the
	// metrics port it sets; the binary accepts it.
	if len(cmdArgs) == 0 || cmdArgs[0] != "serve" {
		t.Fatalf("CMD %v: want serve ...", cmdArgs)
	}
	if !slices.Contains(cmdArgs, "--insecure-listen-all") && !slices.Contains(cmdArgs, "--auth-file") {
		t.Errorf("CMD %v: without --auth-file or --insecure-listen-all mqgate listens on the container's loopback only", cmdArgs)
	}
	if i := slices.Index(cmdArgs, "--metrics-addr"); i >= 0 && i+1 < len(cmdArgs) {
		if p := strconv.Itoa(defaultPortInt(t, cmdArgs[i+1])); !slices.Contains(exposes, p) {
			t.Errorf("EXPOSE %v lacks the metrics port %s", exposes, p)
		}
	}
	printConfig(t, cmdArgs[1:]...)
	// The build command: CGO off, the version variable the binary has.
	var build string
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "./cmd/mqgate") {
		t.Fatalf("build command %q: want CGO_ENABLED=0 go build ... ./cmd/mqgate", build)
	}
	if !strings.Contains(build, "-X main.version=") || !strings.Contains(string(readFile(t, "../cmd/mqgate/main.go")), "var version =") {
		t.Errorf("the build stamps main.version; cmd/mqgate must declare it")
	}
	if testing.Short() {
		return
	}
	// The same build minus -trimpath (which only rewrites file names but
	// would recompile every dependency: ~90 s on 2 cores).
	if !strings.Contains(build, `go build -trimpath -ldflags "-s -w -X main.version=${VERSION}"`) {
		t.Fatalf("the build command changed (%q): update the test's copy of it", build)
	}
	out := filepath.Join(t.TempDir(), "mqgate")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w -X main.version=docker-test", "-o", out, "./cmd/mqgate")
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's go build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v: not static", libs)
	}
	v, err := exec.Command(out, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "mqgate docker-test (") {
		t.Errorf("version of the Docker build: %q %v", v, err)
	}
}
