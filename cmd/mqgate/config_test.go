package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mqgate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "grpc-addr: \":1001\"\nhttp-addr: \":2001\"\nremoting-addr: \":3001\"\nshutdown-timeout: 11s\n")
	env := []string{
		"MQGATE_HTTP_ADDR=:2002",
		"MQGATE_REMOTING_ADDR=:3002",
		"PATH=/bin",
	}
	args := []string{"--config", file, "--remoting-addr", ":3003"}
	cfg, _, _, err := loadConfig(args, env, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GRPCAddr != ":1001" { // file beats default
		t.Errorf("grpc-addr = %q, want file value", cfg.GRPCAddr)
	}
	if cfg.HTTPAddr != ":2002" { // env beats file
		t.Errorf("http-addr = %q, want env value", cfg.HTTPAddr)
	}
	if cfg.RemotingAddr != ":3003" { // flag beats env and file
		t.Errorf("remoting-addr = %q, want flag value", cfg.RemotingAddr)
	}
	if cfg.ShutdownTimeout != 11*time.Second {
		t.Errorf("shutdown-timeout = %v", cfg.ShutdownTimeout)
	}
	if cfg.DataDir != "./data" || cfg.Flush != "async" { // defaults
		t.Errorf("defaults lost: %+v", cfg)
	}
}

func TestConfigFlagCanClearAValue(t *testing.T) {
	cfg, _, _, err := loadConfig([]string{"--remoting-addr", ""}, []string{"MQGATE_REMOTING_ADDR=:1"}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RemotingAddr != "" {
		t.Fatalf("remoting-addr = %q, want disabled", cfg.RemotingAddr)
	}
}

func TestConfigEnvFileSelection(t *testing.T) {
	file := writeFile(t, "flush: sync\n")
	cfg, _, _, err := loadConfig(nil, []string{"MQGATE_CONFIG=" + file}, func(string) {})
	if err != nil || cfg.Flush != "sync" {
		t.Fatalf("cfg.Flush=%q err=%v", cfg.Flush, err)
	}
}

// clusterArgs make a cluster member on loopback peer addresses.
var clusterArgs = []string{"--cluster-id", "c", "--node-id", "1", "--peers", "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		file string
		want string
	}{
		{"unknown file key", nil, nil, "grpc-adr: \":1\"\n", `unknown key "grpc-adr"`},
		{"bad file value", nil, nil, "shutdown-timeout: soon\n", "shutdown-timeout: not a duration"},
		{"bad env value", nil, []string{"MQGATE_AUTO_CREATE=maybe"}, "", "MQGATE_AUTO_CREATE: not a boolean"},
		{"bad flag value", []string{"--flush", "sometimes"}, nil, "", "flush: must be async or sync"},
		{"unknown flag", []string{"--no-such-flag"}, nil, "", "flag provided but not defined: -no-such-flag"},
		{"bad address", []string{"--grpc-addr", "8081"}, nil, "", `grpc-addr: "8081" is not host:port`},
		{"half tls", []string{"--tls-cert", "c.pem"}, nil, "", "tls-cert and tls-key must be set together"},
		{"nested value", nil, nil, "grpc-addr:\n  port: 1\n", "grpc-addr must be a single value"},
		{"stray argument", []string{"extra"}, nil, "", `unexpected argument "extra"`},
		{"size overflow", []string{"--segment-size", "9000000000GiB"}, nil, "", "segment-size: not a size"},
		{"bad disk reserve", []string{"--disk-reserve", "lots"}, nil, "", "disk-reserve: not a disk reserve"},
		{"disk reserve of the whole disk", nil, []string{"MQGATE_DISK_RESERVE=100%"}, "", "MQGATE_DISK_RESERVE: not a disk reserve"},
		{"two disk reserve sizes", nil, nil, "disk-reserve: 1GiB,2GiB\n", "disk-reserve: not a disk reserve"},
		{"half peer tls", append(clusterArgs, "--peer-tls-cert", "c.pem", "--peer-tls-key", "k.pem"), nil, "", "peer-tls-ca missing"},
		{"peer tls ca alone", clusterArgs, []string{"MQGATE_PEER_TLS_CA=ca.pem"}, "", "peer-tls-cert and peer-tls-key missing"},
		{"peer tls files missing", clusterArgs, nil, "peer-tls-cert: c.pem\npeer-tls-key: k.pem\npeer-tls-ca: ca.pem\n", "peer-tls-cert: peer TLS: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append([]string{"--config", writeFile(t, c.file)}, args...)
			}
			_, _, _, err := loadConfig(args, c.env, func(string) {})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestConfigDiskReserve: --disk-reserve takes a size, a share of the
// file system, both (the larger counts) or 0 (off); the default is the
// larger of 1 GiB and 5%.
func TestConfigDiskReserve(t *testing.T) {
	for _, c := range []struct {
		v     string
		bytes int64
		pct   float64
		print string
	}{
		{"", 1 << 30, 5, "1GiB,5%"},
		{"0", 0, 0, "0"},
		{"2GiB", 2 << 30, 0, "2GiB"},
		{"7.5%", 0, 7.5, "7.5%"},
		{" 10% , 512MiB ", 512 << 20, 10, "512MiB,10%"},
	} {
		var args []string
		if c.v != "" {
			args = []string{"--disk-reserve", c.v}
		}
		cfg, _, _, err := loadConfig(args, nil, func(string) {})
		if err != nil {
			t.Fatalf("%q: %v", c.v, err)
		}
		if cfg.DiskReserve != c.bytes || cfg.DiskReservePercent != c.pct {
			t.Errorf("%q: %d bytes, %v%%; want %d, %v%%", c.v, cfg.DiskReserve, cfg.DiskReservePercent, c.bytes, c.pct)
		}
		if got := formatReserve(cfg.DiskReserve, cfg.DiskReservePercent); got != c.print {
			t.Errorf("%q printed as %q, want %q", c.v, got, c.print)
		}
	}
}

func TestConfigUnknownEnvIsWarned(t *testing.T) {
	var warned []string
	_, _, _, err := loadConfig(nil, []string{"MQGATE_GRPC_ADR=:1"}, func(w string) { warned = append(warned, w) })
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "MQGATE_GRPC_ADR") {
		t.Fatalf("warnings = %v", warned)
	}
}

func TestPrintConfigRoundTrips(t *testing.T) {
	cfg, _, printOnly, err := loadConfig([]string{"--print-config", "--segment-size", "64MiB"}, nil, func(string) {})
	if err != nil || !printOnly {
		t.Fatal(err, printOnly)
	}
	out := renderConfig(cfg)
	cfg2, _, _, err := loadConfig([]string{"--config", writeFile(t, out)}, nil, func(string) {})
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out)
	}
	if cfg2 != cfg {
		t.Fatalf("round trip changed the config:\n%+v\n%+v", cfg, cfg2)
	}
}

func TestConfigBareBoolFlag(t *testing.T) {
	cfg, _, _, err := loadConfig([]string{"--auto-create", "--log-level", "warn"}, nil, func(string) {})
	if err != nil || !cfg.AutoCreate || cfg.LogLevel != "warn" {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
	cfg, _, _, err = loadConfig([]string{"--auto-create=false"}, []string{"MQGATE_AUTO_CREATE=true"}, func(string) {})
	if err != nil || cfg.AutoCreate {
		t.Fatalf("explicit false: %+v %v", cfg.AutoCreate, err)
	}
}

// The peer TLS files come from flags, the environment or the file like
// every setting; with them a non-loopback peer address needs no token.
func TestConfigPeerTLS(t *testing.T) {
	f := testutil.NewCA(t, "peer CA").Issue(t, "member")
	peers := []string{"--cluster-id", "c", "--node-id", "1", "--peers", "1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001"}
	if _, _, _, err := loadConfig(peers, nil, func(string) {}); err == nil || !strings.Contains(err.Error(), "--peer-tls-cert") {
		t.Fatalf("non-loopback peers without a token or TLS: %v", err)
	}
	file := writeFile(t, fmt.Sprintf("peer-tls-key: %q\n", f.Key))
	cfg, _, _, err := loadConfig(append(peers, "--config", file, "--peer-tls-cert", f.Cert), []string{"MQGATE_PEER_TLS_CA=" + f.CA}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PeerTLSCert != f.Cert || cfg.PeerTLSKey != f.Key || cfg.PeerTLSCA != f.CA || !cfg.PeerTLS() {
		t.Fatalf("peer TLS settings: %+v", cfg)
	}
	if out := renderConfig(cfg); !strings.Contains(out, fmt.Sprintf("peer-tls-ca: %q", f.CA)) {
		t.Fatalf("print-config lacks the CA file:\n%s", out)
	}
}
