package node

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig is a node on loopback port-0 listeners with remoting off.
func testConfig(t *testing.T) Config {
	cfg := Defaults()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.MetricsAddr, cfg.RemotingAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.SegmentSize = 16 << 20
	cfg.StagingDir = "off"
	cfg.DrainNotice = 0
	return cfg
}

func openNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Open(context.Background(), cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	return n
}

func TestListenAddr(t *testing.T) {
	open := Defaults()
	open.InsecureListenAll = true
	authed := Defaults()
	authed.AuthFile = "users.yaml"
	token := Defaults()
	token.MetricsToken = "t"
	for _, c := range []struct {
		cfg        Config
		name, addr string
		want       string // "" for an error
	}{
		{Defaults(), "grpc-addr", ":8081", "127.0.0.1:8081"},
		{Defaults(), "http-addr", "127.0.0.1:8080", "127.0.0.1:8080"},
		{Defaults(), "http-addr", "[::1]:8080", "[::1]:8080"},
		{Defaults(), "http-addr", "localhost:8080", "localhost:8080"},
		{Defaults(), "grpc-addr", "0.0.0.0:8081", ""},
		{Defaults(), "remoting-addr", "[::]:9876", ""},
		{Defaults(), "grpc-addr", "10.1.2.3:8081", ""},
		{Defaults(), "grpc-addr", "mqgate.example:8081", ""},
		{Defaults(), "metrics-addr", ":9464", "127.0.0.1:9464"},
		{Defaults(), "metrics-addr", "0.0.0.0:9464", ""},
		{open, "grpc-addr", ":8081", ":8081"},
		{open, "grpc-addr", "0.0.0.0:8081", "0.0.0.0:8081"},
		{open, "metrics-addr", ":9464", ":9464"},
		{authed, "grpc-addr", ":8081", ":8081"},
		{authed, "http-addr", "10.1.2.3:8080", "10.1.2.3:8080"},
		{authed, "metrics-addr", "0.0.0.0:9464", ""}, // the users file does not guard /metrics
		{token, "metrics-addr", "0.0.0.0:9464", "0.0.0.0:9464"},
		{token, "grpc-addr", "0.0.0.0:8081", ""},
	} {
		got, err := c.cfg.ListenAddr(c.name, c.addr)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), "--insecure-listen-all") {
				t.Errorf("%s %s (auth %q, token %q, insecure %v): %q, %v; want a refusal naming the setting",
					c.name, c.addr, c.cfg.AuthFile, c.cfg.MetricsToken, c.cfg.InsecureListenAll, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %s (auth %q, insecure %v): %q, %v; want %q", c.name, c.addr, c.cfg.AuthFile, c.cfg.InsecureListenAll, got, err, c.want)
		}
	}
	cfg := Defaults()
	cfg.GRPCAddr = "0.0.0.0:8081"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "grpc-addr") {
		t.Fatalf("Validate of a non-loopback address without auth: %v", err)
	}
}

// TestSegmentSizeHoldsTheLargestRecord: a segment size the store would
// refuse at open (smaller than its largest record) is a configuration
// error naming the setting; the smallest size it accepts passes.
func TestSegmentSizeHoldsTheLargestRecord(t *testing.T) {
	cfg := Defaults()
	cfg.SegmentSize = 1 << 20
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "segment-size") {
		t.Fatalf("Validate of a 1 MiB segment: %v", err)
	}
	cfg.SegmentSize = int64(storage.Options{}.Defaults().MaxRecordSize)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of a segment that holds the largest record: %v", err)
	}
	o := storage.Options{SegmentSize: cfg.SegmentSize}.Defaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("the store refuses the segment size the configuration accepts: %v", err)
	}
}

// TestBusyAddressFailsBeforeTheStore: a listen address that cannot be
// bound fails the start before the data directory is created (or locked).
func TestBusyAddressFailsBeforeTheStore(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, name := range []string{"grpc-addr", "http-addr", "remoting-addr", "metrics-addr"} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			switch name {
			case "grpc-addr":
				cfg.GRPCAddr = busy.Addr().String()
			case "http-addr":
				cfg.HTTPAddr = busy.Addr().String()
			case "remoting-addr":
				cfg.RemotingAddr = busy.Addr().String()
			case "metrics-addr":
				cfg.MetricsAddr = busy.Addr().String()
			}
			n, err := Open(context.Background(), cfg, Options{Logger: quietLogger()})
			if err == nil {
				n.Shutdown(context.Background())
				t.Fatal("started on a busy address")
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error does not name %s: %v", name, err)
			}
			if _, serr := os.Stat(cfg.DataDir); !os.IsNotExist(serr) {
				t.Fatalf("data dir touched before the listeners were checked: %v", serr)
			}
			// The listeners bound before the busy one were released.
			cfg2 := cfg
			cfg2.GRPCAddr, cfg2.HTTPAddr, cfg2.MetricsAddr, cfg2.RemotingAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
			openNode(t, cfg2)
		})
	}
}

// TestMetricsListener: /metrics is served on the metrics address only,
// behind the bearer token when one is set, and not on the HTTP listener.
func TestMetricsListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.MetricsToken = "s3cret"
	n := openNode(t, cfg)
	get := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && !strings.Contains(string(b), "mqgate_store_") {
			t.Fatalf("%s: no store series:\n%.1000s", url, b)
		}
		return resp.StatusCode
	}
	a := n.Addrs()
	if code := get("http://"+a.Metrics+"/metrics", "s3cret"); code != 200 {
		t.Fatalf("/metrics with the token: %d", code)
	}
	for _, tok := range []string{"", "wrong"} {
		if code := get("http://"+a.Metrics+"/metrics", tok); code != http.StatusUnauthorized {
			t.Fatalf("/metrics with token %q: %d, want 401", tok, code)
		}
	}
	if code := get("http://"+a.HTTP+"/metrics", "s3cret"); code != http.StatusNotFound {
		t.Fatalf("/metrics on the HTTP listener: %d, want 404", code)
	}
	// This member's own health, for probes: no token.
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready: single node\n"} {
		resp, err := http.Get("http://" + a.Metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("%s on the metrics listener: %d %q, want 200 %q", path, resp.StatusCode, b, want)
		}
	}
}

// openOnFaultyFS opens a node (auto-create on) whose store lives on an
// in-memory file system behind an error injector, shut down at the end of
// the test.
func openOnFaultyFS(t *testing.T, tune ...func(*Config)) (*Node, *vfs.MemFS, *vfs.ErrorFS) {
	t.Helper()
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := testConfig(t)
	cfg.AutoCreate = true
	for _, f := range tune {
		f(&cfg)
	}
	n, err := Open(context.Background(), cfg, Options{Logger: quietLogger(), StoreFS: efs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	return n, mem, efs
}

// TestNotReadyWhileTheStoreCannotWrite: on a full disk (no disk reserve
// to refuse sends first) a send fails (nothing stored, REST 507), /readyz
// answers 503 and the messaging service's gRPC health turns NOT_SERVING
// while the server's own health (liveness) stays SERVING; once space
// returns the node is ready again without any send.
func TestNotReadyWhileTheStoreCannotWrite(t *testing.T) {
	n, mem, efs := openOnFaultyFS(t, func(c *Config) { c.DiskReserve, c.DiskReservePercent = 0, 0 })
	a := n.Addrs()
	send := func() (int, string) {
		resp, err := http.Post("http://"+a.HTTP+"/v1/topics/full/messages", "application/json",
			strings.NewReader(`{"messages":[{"text":"x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	receive := func() (int, string) {
		resp, err := http.Post("http://"+a.HTTP+"/v1/groups/g/topics/full:receive?body=text", "application/json",
			strings.NewReader(`{"maxMessages":1,"waitDuration":"0s"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	readyz := func() int {
		resp, err := http.Get("http://" + a.HTTP + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cc, err := grpc.NewClient(a.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	health := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if code, body := send(); code != 200 {
		t.Fatalf("send: %d %s", code, body)
	}
	if code := readyz(); code != 200 {
		t.Fatalf("/readyz before the disk filled: %d", code)
	}

	u, _ := mem.Usage("/")
	used := int64(u.Total - u.Free)
	mem.SetCapacity(used + storage.WritableFreeBytes/4)
	efs.SetInject(func(op vfs.Op, path string) error {
		if (op == vfs.OpWrite || op == vfs.OpCreate) && strings.Contains(path, "commitlog") {
			return syscall.ENOSPC
		}
		return nil
	})
	if code, body := send(); code != http.StatusInsufficientStorage || !strings.Contains(body, "the disk is full") {
		t.Fatalf("send on a full disk: %d %s, want 507", code, body)
	}
	if code := readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz on a full disk: %d, want 503", code)
	}
	testutil.Eventually(t, "messaging health NOT_SERVING on a full disk", func() bool {
		return health(messagingHealth) == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if st := health(""); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("server health (liveness) on a full disk: %v", st)
	}
	// A receive cannot record the delivery (nor could its ack): it
	// delivers nothing and says so, and the message stays for later.
	if code, body := receive(); code != http.StatusServiceUnavailable {
		t.Fatalf("receive on a full disk: %d %s, want 503", code, body)
	}

	efs.SetInject(nil)
	mem.SetCapacity(used + 4*storage.WritableFreeBytes)
	if code := readyz(); code != 200 {
		t.Fatalf("/readyz once space returned: %d", code)
	}
	testutil.Eventually(t, "messaging health SERVING once space returned", func() bool {
		return health(messagingHealth) == healthpb.HealthCheckResponse_SERVING
	})
	if code, body := send(); code != 200 {
		t.Fatalf("send once space returned: %d %s", code, body)
	}
	if code, body := receive(); code != 200 || !strings.Contains(body, `"text":"x"`) {
		t.Fatalf("receive once space returned: %d %s", code, body)
	}
}

// TestMetadataThatCannotBePersistedIsRefused: while the meta directory
// refuses writes, creating a topic (admin API, REST, or auto-created by a
// send) answers 503 and leaves no topic behind, so no send is accepted for
// a topic that a restart would not know; once writes work it succeeds.
func TestMetadataThatCannotBePersistedIsRefused(t *testing.T) {
	n, _, efs := openOnFaultyFS(t)
	post := func(path, body string) (int, string) {
		resp, err := http.Post("http://"+n.Addrs().HTTP+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	efs.SetInject(func(op vfs.Op, path string) error {
		if strings.Contains(path, "/meta/") && (op == vfs.OpCreate || op == vfs.OpWrite) {
			return syscall.EROFS
		}
		return nil
	})
	if code, body := post("/v1/topics", `{"name":"orders"}`); code != http.StatusServiceUnavailable {
		t.Fatalf("create topic with a read-only meta dir: %d %s", code, body)
	}
	if code, body := post("/v1/topics/orders/messages", `{"messages":[{"text":"x"}]}`); code != http.StatusServiceUnavailable {
		// auto-create tries again and fails the same way
		t.Fatalf("send to the topic that was not created: %d %s", code, body)
	}
	resp, err := http.Get("http://" + n.Addrs().HTTP + "/v1/topics/orders")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("get the topic that was not created: %d", resp.StatusCode)
	}
	efs.SetInject(nil)
	if code, body := post("/v1/topics", `{"name":"orders"}`); code != 200 {
		t.Fatalf("create topic once writes work: %d %s", code, body)
	}
	if code, body := post("/v1/topics/orders/messages", `{"messages":[{"text":"x"}]}`); code != 200 {
		t.Fatalf("send: %d %s", code, body)
	}
}

// TestInsecureListenAllWarns: binding without auth under
// --insecure-listen-all is logged as a warning naming the open admin API.
func TestInsecureListenAllWarns(t *testing.T) {
	var logs testutil.SyncBuffer
	cfg := testConfig(t)
	cfg.InsecureListenAll = true
	n, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.Shutdown(ctx)
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "--insecure-listen-all") || !strings.Contains(l, "admin API") {
		t.Fatalf("no warning about the open admin API:\n%s", l)
	}
}
