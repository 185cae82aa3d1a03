package mesh

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

func TestMain(m *testing.M) { e2eutil.Main(m) }

// Shared with the other end-to-end packages (internal/e2e/e2eutil).
var (
	uniq        = e2eutil.Uniq
	start       = e2eutil.Start // without the remoting listener
	cli         = e2eutil.CLI   // cli(t, grpcAddr, args...): `mqgate <args> --server <grpcAddr>`, which must exit 0
	isNoMessage = e2eutil.IsNoMessage
	endpointsOf = e2eutil.Endpoints
)

// e2e skips in -short mode and under -race and marks the test parallel
// (e2eutil.Begin).
func e2e(t *testing.T) {
	t.Helper()
	e2eutil.Begin(t)
}

func newProducer(t *testing.T, addr string, topics ...string) rmq.Producer {
	t.Helper()
	return e2eutil.StartProducer(t, e2eutil.Config(addr, ""), rmq.WithTopics(topics...))
}

func newConsumer(t *testing.T, addr, group, topic string, await time.Duration) rmq.SimpleConsumer {
	t.Helper()
	return e2eutil.StartSimpleConsumer(t, e2eutil.Config(addr, group), rmq.WithSimpleAwaitDuration(await),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
}

// receiveAll receives and acks until every id in want arrived (or the
// timeout passes) and returns what arrived: id → body.
func receiveAll(t *testing.T, c rmq.SimpleConsumer, want map[string]bool, timeout time.Duration) map[string]string {
	t.Helper()
	got := map[string]string{}
	deadline := time.Now().Add(timeout)
	missing := func() int {
		n := 0
		for id := range want {
			if _, ok := got[id]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		mvs, err := c.Receive(ctx, 32, 20*time.Second)
		cancel()
		if isNoMessage(err) {
			continue
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, mv := range mvs {
			got[mv.GetMessageId()] = string(mv.GetBody())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.Ack(ctx, mv); err != nil {
				t.Fatalf("ack %s: %v", mv.GetMessageId(), err)
			}
			cancel()
		}
	}
	return got
}

// rawClient is a plain gRPC client on the official client's protocol
// package, for calls the official client hides (QueryRoute's answer,
// statuses, trace headers).
type rawClient struct {
	pb.MessagingServiceClient
	conn *grpc.ClientConn
	id   string
}

func dialRaw(t *testing.T, addr string, useTLS bool) *rawClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if useTLS {
		creds = grpccreds.NewTLS(&tls.Config{InsecureSkipVerify: true})
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{MessagingServiceClient: pb.NewMessagingServiceClient(conn), conn: conn, id: uniq("raw-client")}
}

// ctx is a call context carrying the client id and extra metadata pairs.
func (r *rawClient) ctx(t *testing.T, d time.Duration, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(testutil.Context(t, d), append([]string{"x-mq-client-id", r.id, "x-mq-language", "GO", "x-mq-protocol", "v2"}, kv...)...)
}

func res(name string) *pb.Resource { return &pb.Resource{Name: name} }

// httpDo sends a JSON request and returns the status and body.
func httpDo(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxy is an nginx process running deploy/nginx/nginx.conf.
type proxy struct {
	GRPC, HTTP string // the proxy's listen addresses
	dir        string
	cmd        *exec.Cmd
	done       chan struct{}
}

// nginxBinary finds nginx; without it the test is skipped (failed in CI).
func nginxBinary(t *testing.T) string {
	t.Helper()
	return testutil.Command(t, "the service-mesh tests, which run mqgate behind it", "Debian: apt-get install nginx-light",
		"nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
}

// startProxy runs nginx with the shipped configuration, its upstreams
// pointing at grpcUpstream and httpUpstream, on free loopback ports, with
// everything (pid, logs, temp files, certificate) under a temp directory.
func startProxy(t *testing.T, grpcUpstream, httpUpstream string) *proxy {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	for _, d := range []string{"tls", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeSelfSigned(t, filepath.Join(dir, "tls"))
	src, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "deploy", "nginx", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{dir: dir, done: make(chan struct{}),
		GRPC: testutil.UnusedAddr(t), HTTP: testutil.UnusedAddr(t)}
	userLine := ""
	if os.Geteuid() == 0 {
		// As root the workers would switch to www-data, which cannot read
		// the test's temp directory: keep them as the current user.
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		userLine = "user " + u.Username + ";\n"
	}
	tmp := filepath.Join(dir, "tmp")
	conf := substitute(t, string(src), []struct{ from, to string }{
		{"user www-data;\n", userLine},
		{"worker_processes auto;", "worker_processes 1;"},
		{"worker_connections 4096;", "worker_connections 512;"},
		{"pid /run/nginx-mqgate.pid;", "pid " + filepath.Join(dir, "nginx.pid") + ";"},
		{"error_log /var/log/nginx/mqgate-error.log warn;", "error_log " + filepath.Join(dir, "error.log") + " info;"},
		{"access_log /var/log/nginx/mqgate-access.log;", "access_log " + filepath.Join(dir, "access.log") + ";"},
		{"\nhttp {\n", "\nhttp {\n    client_body_temp_path " + tmp + "/body;\n    proxy_temp_path " + tmp + "/proxy;\n" +
			"    fastcgi_temp_path " + tmp + "/fastcgi;\n    uwsgi_temp_path " + tmp + "/uwsgi;\n    scgi_temp_path " + tmp + "/scgi;\n"},
		{"server mqgate:8081;", "server " + grpcUpstream + ";"},
		{"server mqgate:8080;", "server " + httpUpstream + ";"},
		{"listen 8081 ssl http2;", "listen " + p.GRPC + " ssl http2;"},
		{"listen 8080;", "listen " + p.HTTP + ";"},
		{"ssl_certificate /etc/nginx/tls/tls.crt;", "ssl_certificate " + filepath.Join(dir, "tls", "tls.crt") + ";"},
		{"ssl_certificate_key /etc/nginx/tls/tls.key;", "ssl_certificate_key " + filepath.Join(dir, "tls", "tls.key") + ";"},
	})
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	check := exec.Command(bin, "-t", "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("nginx -t rejects deploy/nginx/nginx.conf: %v\n%s\n%s", err, out.String(), conf)
	}
	p.cmd = exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		// SIGQUIT: graceful stop of the master and its workers; then the
		// whole process group of the nginx we started, if anything is left.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("nginx error log:\n%s", p.file("error.log"))
		}
	})
	for _, addr := range []string{p.GRPC, p.HTTP} {
		waitFor(t, 10*time.Second, "nginx listening on "+addr, func() bool {
			select {
			case <-p.done:
				t.Fatalf("nginx exited:\n%s", p.file("error.log"))
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	return p
}

// behindProxy starts mqgate and nginx in front of it, and creates a topic
// and a group (unique names with these prefixes) on mqgate.
func behindProxy(t *testing.T, topicPrefix, groupPrefix string) (p *testutil.Proc, px *proxy, topic, group string) {
	t.Helper()
	p = start(t, testutil.StartOptions{})
	px = startProxy(t, p.GRPC, p.HTTP)
	topic, group = uniq(topicPrefix), uniq(groupPrefix)
	cli(t, p.GRPC, "topic", "create", topic)
	cli(t, p.GRPC, "group", "create", group)
	return p, px, topic, group
}

// awaitCalls waits until nginx's access log shows a QueryRoute, sends
// SendMessage calls, a ReceiveMessage and acks AckMessage calls.
func (p *proxy) awaitCalls(t *testing.T, sends, acks int) {
	t.Helper()
	for path, atLeast := range map[string]int{
		"/apache.rocketmq.v2.MessagingService/QueryRoute":     1,
		"/apache.rocketmq.v2.MessagingService/SendMessage":    sends,
		"/apache.rocketmq.v2.MessagingService/ReceiveMessage": 1,
		"/apache.rocketmq.v2.MessagingService/AckMessage":     acks,
	} {
		waitFor(t, 5*time.Second, "nginx access log lines for "+path, func() bool { return p.accessCount(path) >= atLeast })
	}
}

func (p *proxy) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(p.dir, name))
	return string(b)
}

// accessCount counts access-log lines whose request mentions path.
func (p *proxy) accessCount(path string) int {
	n := 0
	for _, l := range strings.Split(p.file("access.log"), "\n") {
		if strings.Contains(l, path) {
			n++
		}
	}
	return n
}

// substitute applies each replacement exactly once, failing when the
// shipped file no longer has the text (so the test always runs that file).
func substitute(t *testing.T, s string, reps []struct{ from, to string }) string {
	t.Helper()
	for _, r := range reps {
		if n := strings.Count(s, r.from); n != 1 {
			t.Fatalf("deploy/nginx/nginx.conf has %d occurrences of %q, want 1: update the test with the file", n, r.from)
		}
		s = strings.Replace(s, r.from, r.to, 1)
	}
	return s
}

// writeSelfSigned writes tls.crt and tls.key (clients do not verify).
func writeSelfSigned(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mqgate-mesh-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}
