package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/storage"
)

// peerGroup starts three in-process members of cluster id on loopback
// peer addresses and waits for a leader.
func peerGroup(t *testing.T, id string) (map[uint64]*peer.Node, map[uint64]string) {
	t.Helper()
	return peerGroupTLS(t, id, nil)
}

// peerGroupTLS is peerGroup with member i's peer TLS tlsOf(i) (nil
// tlsOf: plaintext).
func peerGroupTLS(t *testing.T, id string, tlsOf func(i uint64) *peer.TLS) (map[uint64]*peer.Node, map[uint64]string) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	addrs, lis := map[uint64]string{}, map[uint64]net.Listener{}
	for i := uint64(1); i <= 3; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis[i], addrs[i] = l, l.Addr().String()
	}
	nodes := map[uint64]*peer.Node{}
	root := t.TempDir()
	for i, l := range lis {
		dir := filepath.Join(root, fmt.Sprint(i))
		rep, err := raftstore.OpenReplica(filepath.Join(dir, "replica"), raftstore.Options{
			Store: storage.Options{SegmentSize: 64 << 10, MaxBodySize: 8 << 10, MaxRecordSize: 10 << 10,
				StagingDir: "off", Logger: quiet, FlushMode: storage.FlushAsync},
			StoreHost: "cluster:8081", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var tl *peer.TLS
		if tlsOf != nil {
			tl = tlsOf(i)
		}
		token := ""
		if tl == nil {
			token = testPeerToken
		}
		n, err := peer.Start(peer.Config{ClusterID: id, NodeID: i, Peers: addrs, WALDir: filepath.Join(dir, "wal"), Listener: l,
			TickInterval: 20 * time.Millisecond, TLS: tl, Token: token, Logger: quiet}, rep)
		if err != nil {
			rep.Close(context.Background())
			t.Fatal(err)
		}
		rep.Attach(n)
		nodes[i] = n
		t.Cleanup(func() {
			n.Stop()
			rep.Close(context.Background())
		})
	}
	waitLeader(t, nodes, 0)
	return nodes, addrs
}

// waitLeader waits until every member names the same leader (want, if
// not 0) and returns it.
func waitLeader(t *testing.T, nodes map[uint64]*peer.Node, want uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var lead uint64
		agreed := true
		for id, n := range nodes {
			if n.IsLeader() {
				lead = id
			}
		}
		for _, n := range nodes {
			agreed = agreed && lead != 0 && n.Leader() == lead
		}
		if agreed && (want == 0 || lead == want) {
			return lead
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreed leader (want %d)", want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReplicating waits until the leader's progress of every member is
// replicating (a member that knows the leader may not have answered its
// first append yet).
func waitReplicating(t *testing.T, leader *peer.Node, members int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := leader.Status(ctx)
		cancel()
		n := 0
		for _, p := range st.Progress {
			if p.State == "StateReplicate" && p.Match > 0 {
				n++
			}
		}
		if err == nil && n == members {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader replicates to %d of %d members: %+v, %v", n, members, st.Progress, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runCluster(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"cluster"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// testPeerToken is the peer token of a test group without peer TLS.
const testPeerToken = "cli-test-peer-token"

func TestClusterCommand(t *testing.T) {
	t.Setenv("MQGATE_PEER_TOKEN", testPeerToken)
	nodes, addrs := peerGroup(t, "cli-test")
	lead := waitLeader(t, nodes, 0)
	waitReplicating(t, nodes[lead], len(nodes))
	var follower uint64
	for id := range nodes {
		if id != lead {
			follower = id
			break
		}
	}

	// Status from a follower: its own view, the progress from the leader.
	code, out, errs := runCluster("status", "--peer", addrs[follower], "--cluster-id", "cli-test")
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	for _, want := range []string{
		fmt.Sprintf("member %d (Follower)", follower),
		fmt.Sprintf("leader: %d at %s", lead, addrs[lead]),
		"commit ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("status output lacks %q:\n%s", want, out)
		}
	}
	for id, addr := range addrs {
		role := "follower"
		if id == lead {
			role = "leader"
		}
		line := fmt.Sprintf(`(?m)^%d\s+%s\s+%s\s+[1-9]\d*\s+[1-9]\d*\s+Replicate$`, id, regexp.QuoteMeta(addr), role)
		if !regexp.MustCompile(line).MatchString(out) {
			t.Fatalf("status output lacks member line %q with its progress:\n%s", line, out)
		}
	}

	code, out, errs = runCluster("status", "--json", "--peer", addrs[lead], "--cluster-id", "cli-test")
	if code != exitOK {
		t.Fatalf("status --json: exit %d: %s", code, errs)
	}
	var st peer.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if st.ID != lead || st.Leader != lead || st.Term == 0 || len(st.Progress) != 3 || !maps.Equal(st.Peers, addrs) {
		t.Fatalf("status --json: %+v", st)
	}

	// Transfer, sent to the leader, then to a follower (the old leader).
	code, out, errs = runCluster("transfer-leader", "--peer", addrs[lead], "--cluster-id", "cli-test", "--to", fmt.Sprint(follower))
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("member %d leads", follower)) {
		t.Fatalf("transfer-leader: exit %d: %s%s", code, out, errs)
	}
	waitLeader(t, nodes, follower)
	code, _, errs = runCluster("transfer-leader", "--peer", addrs[lead], "--cluster-id", "cli-test", "--to", fmt.Sprint(lead))
	if code != exitOK {
		t.Fatalf("transfer-leader through a follower: exit %d: %s", code, errs)
	}
	waitLeader(t, nodes, lead)

	// Failures: another cluster's id, no member at the address.
	code, _, errs = runCluster("status", "--peer", addrs[lead], "--cluster-id", "other")
	if code != exitFail || !strings.Contains(errs, "another cluster") {
		t.Fatalf("status with another cluster id: exit %d: %s", code, errs)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	code, _, errs = runCluster("status", "--peer", closed, "--cluster-id", "cli-test", "--timeout", "2s")
	if code != exitFail || !strings.Contains(errs, "cannot reach") {
		t.Fatalf("status of no member: exit %d: %s", code, errs)
	}
	code, _, errs = runCluster("transfer-leader", "--peer", addrs[lead], "--cluster-id", "cli-test", "--to", "9")
	if code != exitFail || !strings.Contains(errs, "member 9 is not a voter") {
		t.Fatalf("transfer to no member: exit %d: %s", code, errs)
	}
}

func TestClusterCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"status"},
		{"status", "--peer", "127.0.0.1:1"},
		{"status", "--cluster-id", "x"},
		{"status", "--peer", "127.0.0.1:1", "--cluster-id", "x", "extra"},
		{"transfer-leader", "--peer", "127.0.0.1:1", "--cluster-id", "x"},
		{"transfer-leader", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--to", "0"},
		{"transfer-leader", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--to", "two"},
		{"status", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--to", "2"},
		{"add-node", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--node-peer", "127.0.0.1:2"},
		{"add-node", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--node-id", "4"},
		{"add-node", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--node-id", "4", "--node-peer", "no-port"},
		{"add-node", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--to", "4", "--node-peer", "127.0.0.1:2"},
		{"remove-node", "--peer", "127.0.0.1:1", "--cluster-id", "x"},
		{"remove-node", "--peer", "127.0.0.1:1", "--cluster-id", "x", "--node-id", "0"},
	} {
		code, _, errs := runCluster(args...)
		if code != exitUsage || !strings.Contains(errs, "Usage:") {
			t.Fatalf("cluster %q: exit %d, want %d with the usage: %s", args, code, exitUsage, errs)
		}
	}
	if code, out, _ := runCluster("help"); code != exitOK || !strings.Contains(out, "transfer-leader") || !strings.Contains(out, "add-node") {
		t.Fatalf("cluster help: exit %d: %s", code, out)
	}
}
