package main

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/internal/testutil"
)

// tlsArgs are the `mqgate cluster` flags of f.
func tlsArgs(f testutil.CertFiles) []string {
	return []string{"--peer-tls-cert", f.Cert, "--peer-tls-key", f.Key, "--peer-tls-ca", f.CA}
}

// The cluster commands against members that run with mutual TLS: with a
// certificate of their CA (flags or environment) they work; without one,
// with one of another CA, or with a partial or broken set, they fail and
// say why.
func TestClusterCommandTLS(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	nodes, addrs := peerGroupTLS(t, "cli-tls", func(uint64) *peer.TLS {
		f := ca.Issue(t, "member")
		tl, err := peer.LoadTLS(peer.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	})
	lead := waitLeader(t, nodes, 0)
	var follower uint64
	for id := range nodes {
		if id != lead {
			follower = id
			break
		}
	}
	operator := ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth)

	code, out, errs := runCluster(append([]string{"status", "--peer", addrs[follower], "--cluster-id", "cli-tls"}, tlsArgs(operator)...)...)
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("leader: %d at %s", lead, addrs[lead])) {
		t.Fatalf("status over TLS: exit %d: %s%s", code, out, errs)
	}
	code, out, errs = runCluster(append([]string{"transfer-leader", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--to", fmt.Sprint(follower)}, tlsArgs(operator)...)...)
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("member %d leads", follower)) {
		t.Fatalf("transfer-leader over TLS: exit %d: %s%s", code, out, errs)
	}
	waitLeader(t, nodes, follower)

	// The same files from the environment.
	t.Setenv("MQGATE_PEER_TLS_CERT", operator.Cert)
	t.Setenv("MQGATE_PEER_TLS_KEY", operator.Key)
	t.Setenv("MQGATE_PEER_TLS_CA", operator.CA)
	code, out, errs = runCluster("status", "--json", "--peer", addrs[lead], "--cluster-id", "cli-tls")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf(`"leader": %d`, follower)) {
		t.Fatalf("status with the environment's TLS: exit %d: %s%s", code, out, errs)
	}
	t.Setenv("MQGATE_PEER_TLS_CERT", "")
	t.Setenv("MQGATE_PEER_TLS_KEY", "")
	t.Setenv("MQGATE_PEER_TLS_CA", "")

	code, _, errs = runCluster("status", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--timeout", "3s")
	if code != exitFail || !strings.Contains(errs, "pass --peer-tls-cert") {
		t.Fatalf("status in plaintext: exit %d: %s", code, errs)
	}
	stranger := testutil.NewCA(t, "other CA").Issue(t, "operator")
	code, _, errs = runCluster(append([]string{"status", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--timeout", "3s"}, tlsArgs(stranger)...)...)
	if code != exitFail || !strings.Contains(errs, "TLS handshake") {
		t.Fatalf("status with a certificate of another CA: exit %d: %s", code, errs)
	}
	// A caller that trusts the members but whose own certificate is of
	// another CA: the members refuse it.
	otherCA := testutil.NewCA(t, "another CA")
	intruder := otherCA.Issue(t, "operator")
	intruder.CA = filepath.Join(t.TempDir(), "both.pem")
	both := append(readFile(t, ca.File), readFile(t, otherCA.File)...)
	if err := os.WriteFile(intruder.CA, both, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCluster(append([]string{"status", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--timeout", "3s"}, tlsArgs(intruder)...)...)
	if code != exitFail || !strings.Contains(errs, "TLS handshake") {
		t.Fatalf("status with a certificate the members refuse: exit %d: %s", code, errs)
	}
	code, _, errs = runCluster("status", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--peer-tls-cert", operator.Cert, "--peer-tls-key", operator.Key)
	if code != exitUsage || !strings.Contains(errs, "go together") {
		t.Fatalf("status with a partial TLS set: exit %d: %s", code, errs)
	}
	code, _, errs = runCluster("status", "--peer", addrs[lead], "--cluster-id", "cli-tls", "--peer-tls-cert", operator.Cert, "--peer-tls-key", stranger.Key, "--peer-tls-ca", operator.CA)
	if code != exitFail || !strings.Contains(errs, "peer TLS: ") || !strings.Contains(errs, "private key does not match") {
		t.Fatalf("status with a key of another certificate: exit %d: %s", code, errs)
	}
}

// Three `mqgate serve` processes with mutual TLS between them (the files
// given by flags, by the environment and by a configuration file) form a
// group: `mqgate cluster` commands with a certificate of their CA read
// its status, add a fourth member (with TLS too) and remove one, a
// message sent through one member is received through another, and a
// command in plaintext is refused.
func TestClusterTLSProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ca := testutil.NewCA(t, "peer CA")
	const id = "tls-procs"
	peerAddrs := map[int]string{}
	for i := 1; i <= 4; i++ {
		peerAddrs[i] = testutil.StableAddr(t)
	}
	peers := fmt.Sprintf("1=%s,2=%s,3=%s", peerAddrs[1], peerAddrs[2], peerAddrs[3])
	procs := map[int]*testutil.Proc{}
	start := func(i int, peers string, extra ...string) {
		f := ca.Issue(t, fmt.Sprintf("member-%d", i))
		o := testutil.StartOptions{Args: append([]string{"--cluster-id", id, "--node-id", fmt.Sprint(i), "--peers", peers, "--auto-create"}, extra...)}
		switch i {
		case 2:
			o.Env = []string{"MQGATE_PEER_TLS_CERT=" + f.Cert, "MQGATE_PEER_TLS_KEY=" + f.Key, "MQGATE_PEER_TLS_CA=" + f.CA}
		case 3:
			o.Args = append(o.Args, "--config", writeFile(t, fmt.Sprintf("peer-tls-cert: %q\npeer-tls-key: %q\npeer-tls-ca: %q\n", f.Cert, f.Key, f.CA)))
		default:
			o.Args = append(o.Args, tlsArgs(f)...)
		}
		procs[i] = testutil.Start(t, o)
	}
	for i := 1; i <= 3; i++ {
		start(i, peers)
	}
	operator := ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth)
	bin := testutil.Binary(t)
	// cli runs the binary until it succeeds (the members elect a leader
	// after they start; a joined member catches up first).
	cli := func(args ...string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			cmd := exec.Command(bin, args...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				return string(out)
			}
			if time.Now().After(deadline) {
				t.Fatalf("mqgate %q: %v\n%s", args, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	clusterCLI := func(args ...string) string {
		t.Helper()
		return cli(append(append([]string{"cluster"}, args...), tlsArgs(operator)...)...)
	}
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out = clusterCLI("status", "--peer", peerAddrs[2], "--cluster-id", id)
		if strings.Contains(out, "leader: ") && !strings.Contains(out, "none known") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader:\n%s", out)
		}
	}
	cli("send", "--server", procs[2].GRPC, "--topic", "hello", "Hello, TLS cluster!")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out = cli("receive", "--server", procs[3].GRPC, "--group", "readers", "--topic", "hello", "--wait", "1s")
		if strings.Contains(out, "Hello, TLS cluster!") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message sent through member 2 was not received through member 3:\n%s", out)
		}
	}

	start(4, peers+",4="+peerAddrs[4], "--join")
	if out := clusterCLI("add-node", "--peer", peerAddrs[3], "--cluster-id", id, "--node-id", "4", "--node-peer", peerAddrs[4]); !strings.Contains(out, "member 4 votes") {
		t.Fatalf("add-node: %s", out)
	}
	if out := clusterCLI("remove-node", "--peer", peerAddrs[2], "--cluster-id", id, "--node-id", "1"); !strings.Contains(out, "member 1 removed") {
		t.Fatalf("remove-node: %s", out)
	}
	select {
	case <-procs[1].Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the removed member did not stop")
	}
	out = clusterCLI("status", "--json", "--peer", peerAddrs[4], "--cluster-id", id)
	var st peer.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || !slices.Equal(st.Voters, []uint64{2, 3, 4}) {
		t.Fatalf("status after the changes: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "cluster", "status", "--peer", peerAddrs[2], "--cluster-id", id, "--timeout", "3s")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "pass --peer-tls-cert") {
		t.Fatalf("status in plaintext: %v\n%s", err, b)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
