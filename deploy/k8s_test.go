package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/mqgate/mqgate/internal/testutil"
)

// manifests are the Kubernetes manifests of deploy/k8s, every object of
// which is checked offline.
var manifests = []string{"k8s/mqgate.yaml", "k8s/mqgate-cluster.yaml"}

// objects are one manifest file's objects, decoded into the Kubernetes
// API's own types.
type objects struct {
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
	pdbs         map[string]*policyv1.PodDisruptionBudget
}

// decodeStrict decodes every document of a manifest into the API type of
// its apiVersion and kind, refusing unknown fields (a misspelt or
// misplaced key) and values of the wrong type, as the API server would.
func decodeStrict(t *testing.T, name string) objects {
	t.Helper()
	o, err := decodeManifest(name, readFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func decodeManifest(name string, b []byte) (objects, error) {
	o := objects{configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		statefulSets: map[string]*appsv1.StatefulSet{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for i := 1; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return o, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		raw, err := yaml.Marshal(&doc)
		if err != nil {
			return o, err
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := k8syaml.Unmarshal(raw, &head); err != nil {
			return o, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			cm := &corev1.ConfigMap{}
			o.configMaps[head.Metadata.Name], obj = cm, cm
		case "v1 Service":
			s := &corev1.Service{}
			o.services[head.Metadata.Name], obj = s, s
		case "apps/v1 StatefulSet":
			s := &appsv1.StatefulSet{}
			o.statefulSets[head.Metadata.Name], obj = s, s
		case "policy/v1 PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			o.pdbs[head.Metadata.Name], obj = p, p
		default:
			return o, fmt.Errorf("%s: document %d: %s %s is not a kind this test knows", name, i, head.APIVersion, head.Kind)
		}
		if err := k8syaml.UnmarshalStrict(raw, obj); err != nil {
			return o, fmt.Errorf("%s: %s %q: %w", name, head.Kind, head.Metadata.Name, err)
		}
		if errs := validation.IsDNS1123Subdomain(head.Metadata.Name); len(errs) > 0 {
			return o, fmt.Errorf("%s: %s name %q: %v", name, head.Kind, head.Metadata.Name, errs)
		}
	}
	return o, nil
}

// checkReferences checks what the API server cannot: that the objects of
// a manifest fit together.
func checkReferences(name string, o objects) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for ssName, ss := range o.statefulSets {
		pod := ss.Spec.Template
		sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			fail("%s: StatefulSet %s: its selector %v does not match its pods' labels %v", name, ssName, ss.Spec.Selector, pod.Labels)
		}
		if svc := o.services[ss.Spec.ServiceName]; svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			fail("%s: StatefulSet %s: serviceName %q is not a headless Service of the file", name, ssName, ss.Spec.ServiceName)
		}
		volumes := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			volumes[v.Name] = true
			if v.ConfigMap != nil && o.configMaps[v.ConfigMap.Name] == nil {
				fail("%s: volume %s names the ConfigMap %q, not in the file", name, v.Name, v.ConfigMap.Name)
			}
		}
		for _, c := range ss.Spec.VolumeClaimTemplates {
			volumes[c.Name] = true
		}
		for _, c := range pod.Spec.Containers {
			ports := map[string]int32{}
			for _, p := range c.Ports {
				if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
					fail("%s: port %q: %v", name, p.Name, errs)
				}
				if _, dup := ports[p.Name]; dup {
					fail("%s: port %q twice", name, p.Name)
				}
				ports[p.Name] = p.ContainerPort
			}
			for _, m := range c.VolumeMounts {
				if !volumes[m.Name] {
					fail("%s: container %s mounts %q, which is no volume", name, c.Name, m.Name)
				}
			}
			for probeName, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil {
					fail("%s: container %s has no %s probe", name, c.Name, probeName)
					continue
				}
				if g := p.HTTPGet; g != nil && g.Port.Type == intstr.String && ports[g.Port.StrVal] == 0 {
					fail("%s: %s probe port %q is no container port", name, probeName, g.Port.StrVal)
				}
			}
			defined := map[string]bool{}
			for _, e := range c.Env {
				if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
					fail("%s: env %s: %v", name, e.Name, errs)
				}
				for _, ref := range envRef.FindAllStringSubmatch(e.Value, -1) {
					if !defined[ref[1]] {
						fail("%s: env %s refers to $(%s), not defined before it", name, e.Name, ref[1])
					}
				}
				defined[e.Name] = true
			}
			// A memory limit comes with Go's soft limit below it: without
			// one, a flood of large requests leaves freed memory to pile up
			// past the container's limit.
			if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				soft := ""
				for _, e := range c.Env {
					if e.Name == "GOMEMLIMIT" {
						soft = e.Value
					}
				}
				if b, ok := goMemLimit(soft); !ok || b >= lim.Value() {
					fail("%s: container %s has a memory limit of %s and GOMEMLIMIT %q: set it below the limit", name, c.Name, lim.String(), soft)
				}
			}
			// Every Service port of these pods targets a container port.
			for svcName, svc := range o.services {
				if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
					continue
				}
				for _, p := range svc.Spec.Ports {
					if p.TargetPort.Type != intstr.String || ports[p.TargetPort.StrVal] != p.Port {
						fail("%s: Service %s port %s (%d) does not target the container port of that name and number", name, svcName, p.Name, p.Port)
					}
				}
			}
		}
	}
	for svcName, svc := range o.services {
		matched := false
		for _, ss := range o.statefulSets {
			matched = matched || (len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ss.Spec.Template.Labels)))
		}
		if !matched {
			fail("%s: Service %s selects no pod of the file", name, svcName)
		}
	}
	for pdbName, pdb := range o.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		matched := false
		for _, ss := range o.statefulSets {
			matched = matched || (err == nil && sel.Matches(labels.Set(ss.Spec.Template.Labels)))
		}
		if !matched {
			fail("%s: PodDisruptionBudget %s selects no pod of the file", name, pdbName)
		}
	}
	return errs
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// Every manifest decodes into the Kubernetes API's types without an
// unknown field, and its objects refer to each other correctly.
func TestKubernetesManifestsValidate(t *testing.T) {
	for _, name := range manifests {
		for _, err := range checkReferences(name, decodeStrict(t, name)) {
			t.Error(err)
		}
	}
}

// The checks above catch what they are for: a misspelt field, a field in
// the wrong place, a mount of no volume, a Service port targeting no
// container port.
func TestKubernetesValidationCatchesMistakes(t *testing.T) {
	good := string(readFile(t, "k8s/mqgate-cluster.yaml"))
	for what, edit := range map[string][2]string{
		"a misspelt field":          {"podManagementPolicy: Parallel", "podManagmentPolicy: Parallel"},
		"a field in the wrong spec": {"  serviceName: mqgate-peers\n", "  serviceName: mqgate-peers\n  publishNotReadyAddresses: true\n"},
		"a mount of no volume":      {"- { name: users, mountPath: /etc/mqgate-users, readOnly: true }", "- { name: user, mountPath: /etc/mqgate-users, readOnly: true }"},
		"a port targeting nothing":  {"- { name: http, port: 8080, targetPort: http }", "- { name: http, port: 8080, targetPort: htp }"},
		"a wrong type":              {"replicas: 3", "replicas: three"},
	} {
		if !strings.Contains(good, edit[0]) {
			t.Fatalf("%s: the manifest no longer has %q", what, edit[0])
		}
		o, err := decodeManifest(what, []byte(strings.Replace(good, edit[0], edit[1], 1)))
		if err == nil && len(checkReferences(what, o)) == 0 {
			t.Errorf("%s went unnoticed", what)
		}
	}
}

// The cluster's StatefulSet, rendered for each of its pods as Kubernetes
// gives them (host name mqgate-N, the environment with its $(VAR)s
// expanded, the Secrets' files where the manifest mounts them), is a
// configuration mqgate accepts: pod mqgate-N is member N+1, with its own
// certificate from the one Secret, every member's peer address in
// --peers, and the probes, ports and grace period fit the binary.
func TestKubernetesClusterRendersEveryMember(t *testing.T) {
	const name = "k8s/mqgate-cluster.yaml"
	o := decodeStrict(t, name)
	ss := o.statefulSets["mqgate"]
	if ss == nil || ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 || ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("want a StatefulSet mqgate of 3 pods started in parallel (none is ready before a majority runs): %+v", ss)
	}
	peersSvc := o.services[ss.Spec.ServiceName]
	if !peersSvc.Spec.PublishNotReadyAddresses {
		t.Errorf("the peers' Service must publish the members' names before they are ready")
	}
	pdb := o.pdbs["mqgate"]
	if pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("want a PodDisruptionBudget with maxUnavailable 1: %+v", pdb)
	}
	pod := ss.Spec.Template.Spec
	c := pod.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if r := c.ReadinessProbe.HTTPGet; r == nil || r.Path != "/readyz" || r.Port.StrVal != "metrics" {
		t.Errorf("readiness: want /readyz on the metrics listener (the member's own), got %+v", c.ReadinessProbe)
	}
	if len(c.Args) < 3 || c.Args[0] != "serve" || c.Args[1] != "--config" {
		t.Fatalf("args %v: want serve --config FILE", c.Args)
	}
	mounts := map[string]string{} // volume → mount path
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.SubPath != "" || m.SubPathExpr != "" {
			t.Errorf("volume %s is mounted with a subPath: Secret updates (certificate renewals) would not reach it", m.Name)
		}
	}
	secrets := map[string]string{} // Secret → mount path
	var configMap string
	for _, v := range pod.Volumes {
		switch {
		case v.Secret != nil:
			secrets[v.Secret.SecretName] = mounts[v.Name]
		case v.ConfigMap != nil:
			configMap = v.ConfigMap.Name
			if !strings.HasPrefix(c.Args[2], mounts[v.Name]+"/") {
				t.Errorf("--config %s is not in the ConfigMap's mount %s", c.Args[2], mounts[v.Name])
			}
		}
	}
	cfgText := o.configMaps[configMap].Data[filepath.Base(c.Args[2])]
	var cfg map[string]string
	if err := yaml.Unmarshal([]byte(cfgText), &cfg); err != nil {
		t.Fatal(err)
	}
	// The Secrets as the header's commands make them: their keys.
	header := string(readFile(t, name))
	secretKeys := map[string][]string{}
	for _, cmd := range regexp.MustCompile(`kubectl create secret generic ([a-z0-9-]+)((?:[^\n]*\\\n)*[^\n]*)`).FindAllStringSubmatch(header, -1) {
		for _, m := range regexp.MustCompile(`--from-(?:file|literal)=([A-Za-z0-9._-]+)=`).FindAllStringSubmatch(cmd[2], -1) {
			secretKeys[cmd[1]] = append(secretKeys[cmd[1]], m[1])
		}
	}
	for s := range secrets {
		if len(secretKeys[s]) == 0 {
			t.Errorf("the header does not say how to create the Secret %s", s)
		}
	}
	// Materialize the Secrets: a users file, a CA and one certificate per
	// member under the keys the header gives them.
	root := t.TempDir()
	ca := testutil.NewCA(t, "mqgate peer CA")
	for s, keys := range secretKeys {
		dir := filepath.Join(root, s)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			var content []byte
			switch {
			case k == "users.yaml":
				content = []byte("users:\n  - {accessKey: ops, secretKey: s, admin: true}\n")
			case k == "ca.pem":
				content = readAbs(t, ca.File)
			case strings.HasSuffix(k, "-key.pem"):
				continue // written with its certificate
			case strings.HasSuffix(k, ".pem"):
				f := ca.Issue(t, strings.TrimSuffix(k, ".pem"))
				content = readAbs(t, f.Cert)
				writeAbs(t, filepath.Join(dir, strings.TrimSuffix(k, ".pem")+"-key.pem"), readAbs(t, f.Key))
			default:
				content = []byte("a-token-" + k)
			}
			writeAbs(t, filepath.Join(dir, k), content)
		}
	}
	// The ConfigMap's paths under the Secrets' mounts, moved to the copies.
	rewrite := func(v string) string {
		for s, mount := range secrets {
			if strings.HasPrefix(v, mount+"/") {
				return filepath.Join(root, s, strings.TrimPrefix(v, mount+"/"))
			}
		}
		return v
	}
	var local strings.Builder
	for k, v := range cfg {
		fmt.Fprintf(&local, "%s: %q\n", k, rewrite(v))
	}
	cfgFile := filepath.Join(root, "mqgate.yaml")
	writeAbs(t, cfgFile, []byte(local.String()))

	shutdown, err := time.ParseDuration(cfg["shutdown-timeout"])
	if err != nil {
		t.Fatal(err)
	}
	if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= shutdown+2*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s is not above the shutdown deadline %s, within which the leader hands over", grace, shutdown)
	}
	const namespace = "mqgate-ns"
	for i := range int(*ss.Spec.Replicas) {
		host := fmt.Sprintf("%s-%d", ss.Name, i)
		env := podEnv(t, c, namespace, fmt.Sprintf("10.1.0.%d", i+1), root)
		env = append(env, "MQGATE_TEST_HOSTNAME="+host)
		got := printConfigEnv(t, env, "--config", cfgFile)
		id := strconv.Itoa(i + 1)
		if got["node-id"] != id {
			t.Errorf("pod %s: node-id %q, want %s", host, got["node-id"], id)
		}
		if want := filepath.Join(root, "mqgate-peer-tls", "member-"+id+".pem"); got["peer-tls-cert"] != want {
			t.Errorf("pod %s: peer-tls-cert %q, want %q", host, got["peer-tls-cert"], want)
		}
		peers, err := parsePeers(got["peers"])
		if err != nil || len(peers) != 3 {
			t.Fatalf("pod %s: peers %q: %v", host, got["peers"], err)
		}
		own := peers[i+1]
		if !strings.HasPrefix(own, host+"."+ss.Spec.ServiceName+"."+namespace+".svc.") || !strings.HasSuffix(own, ":"+strconv.Itoa(int(ports["peer"]))) {
			t.Errorf("pod %s: its peer address %q is not its name under the Service %s on the peer port %d", host, own, ss.Spec.ServiceName, ports["peer"])
		}
		if got["advertise-addr"] != fmt.Sprintf("10.1.0.%d:%d", i+1, ports["grpc"]) {
			t.Errorf("pod %s: advertise-addr %q: want its pod IP and gRPC port", host, got["advertise-addr"])
		}
		if got["cluster-id"] == "" || got["auth-file"] == "" || got["metrics-token"] == "" {
			t.Errorf("pod %s: cluster-id %q, auth-file %q, metrics-token set %v", host, got["cluster-id"], got["auth-file"], got["metrics-token"] != "")
		}
		for k, p := range map[string]string{"grpc-addr": "grpc", "http-addr": "http", "remoting-addr": "remoting", "metrics-addr": "metrics"} {
			if defaultPortInt(t, got[k]) != int(ports[p]) {
				t.Errorf("pod %s: %s %q is not the container port %s (%d)", host, k, got[k], p, ports[p])
			}
		}
	}
	// A pod whose host name is no member's is refused with the reason.
	env := append(podEnv(t, c, namespace, "10.1.0.9", root), "MQGATE_TEST_HOSTNAME=mqgate-7")
	if out, err := runServe(t, env, "--config", cfgFile, "--print-config"); err == nil || !strings.Contains(out, `no member of --peers`) {
		t.Errorf("host mqgate-7: %v\n%s", err, out)
	}
}

// podEnv is a container's environment as Kubernetes gives it: field
// references filled in, Secret keys read from their copies in root,
// $(VAR)s expanded.
func podEnv(t *testing.T, c corev1.Container, namespace, podIP, root string) []string {
	t.Helper()
	vals := map[string]string{}
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = namespace
			case f.FieldRef != nil && f.FieldRef.FieldPath == "status.podIP":
				v = podIP
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				v = "pod"
			case f.SecretKeyRef != nil:
				v = string(readAbs(t, filepath.Join(root, f.SecretKeyRef.Name, f.SecretKeyRef.Key)))
			default:
				t.Fatalf("env %s: a source this test cannot fill in", e.Name)
			}
		} else {
			v = envRef.ReplaceAllStringFunc(v, func(ref string) string { return vals[envRef.FindStringSubmatch(ref)[1]] })
		}
		vals[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out
}

func parsePeers(s string) (map[int]string, error) {
	out := map[int]string{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(id)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q", part)
		}
		out[n] = addr
	}
	return out, nil
}

func readAbs(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAbs(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// printConfigEnv is printConfig with more environment.
func printConfigEnv(t *testing.T, env []string, args ...string) map[string]string {
	t.Helper()
	out, err := runServe(t, env, append(args, "--print-config")...)
	if err != nil {
		t.Fatalf("mqgate serve %s --print-config: %v\n%s", strings.Join(args, " "), err, out)
	}
	var m map[string]string
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("print-config output: %v\n%s", err, out)
	}
	return m
}

func runServe(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(needBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// goMemLimit reads a GOMEMLIMIT value (bytes, or a number with B, KiB,
// MiB, GiB or TiB, as the Go runtime takes it).
func goMemLimit(v string) (int64, bool) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n * mult, true
}
