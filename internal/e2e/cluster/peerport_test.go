package cluster

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterPeerPortRefusesStrangers: a process on the same machine
// that knows the cluster id and the members' ids, but not the peer
// token, tries what a stranger could do to a group: commit a garbage
// proposal, depose the leader with a heartbeat of a high term, copy the
// store, move the leadership, remove a member, and push a large request.
// Every call is refused, the group keeps its leader and serves, and the
// leader's /metrics counts the refusals.
func TestClusterPeerPortRefusesStrangers(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	f := g.others(l)[0]
	conn, err := grpc.NewClient(l.peer, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// What a stranger can know: the cluster id and the members' ids.
	stranger := metadata.NewOutgoingContext(ctx, metadata.Pairs("mqgate-cluster-id", g.id, "mqgate-from-node", strconv.Itoa(f.id),
		"mqgate-peer-token", "a-guess-at-the-token"))
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("%s without the token: %v, want Unauthenticated", what, err)
		}
	}
	pc := clusterv1.NewPeerServiceClient(conn)
	raftSend := func(m *raftpb.Message) error {
		s, err := pc.Raft(stranger)
		if err != nil {
			return err
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&clusterv1.RaftRequest{Messages: []*clusterv1.RaftMessage{{Message: b}}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = s.CloseAndRecv()
		return err
	}
	lead, from := uint64(l.id), uint64(f.id)
	refused("a garbage proposal", raftSend(&raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lead), From: new(from),
		Entries: []*raftpb.Entry{{Data: []byte("garbage that would stop every member")}}}))
	refused("a heartbeat of term 1000", raftSend(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(lead), From: new(from), Term: new(uint64(1000))}))
	refused("a snapshot at index 1e9", raftSend(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(lead), From: new(from), Term: new(uint64(1000)),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1e9)), Term: new(uint64(1000))}}}))
	cs, err := pc.CopyStore(stranger, &clusterv1.CopyStoreRequest{})
	if err == nil {
		_, err = cs.Recv()
	}
	refused("a copy of the store", err)
	_, err = pc.TransferLeadership(stranger, &clusterv1.TransferLeadershipRequest{To: from})
	refused("a transfer of the leadership", err)
	_, err = pc.RemoveMember(stranger, &clusterv1.RemoveMemberRequest{Id: from})
	refused("a member's removal", err)
	// A request of 32 MiB to a method that takes a few bytes: Info with
	// unknown fields (a BytesValue's bytes) on the wire.
	refused("an Info of 32 MiB", conn.Invoke(stranger, clusterv1.PeerService_Info_FullMethodName, wrapperspb.Bytes(make([]byte, 32<<20)), new(clusterv1.InfoResponse)))
	out, err := e2eutil.CLIResultArgs(t, "cluster", "transfer-leader", "--peer", l.peer, "--cluster-id", g.id, "--to", strconv.Itoa(f.id),
		"--peer-token", "a-guess-at-the-token", "--timeout", "5s")
	if err == nil || !strings.Contains(out, "refused the peer token") {
		t.Fatalf("transfer-leader with another token: %v\n%s", err, out)
	}

	if nl := g.leader(10 * time.Second); nl != l {
		t.Fatalf("member %d leads after the refused calls, member %d before", nl.id, l.id)
	}
	topic := e2eutil.Uniq("stranger")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte("still serving")}, 20*time.Second)

	body := []byte(e2eutil.ScrapeMetrics(t, l.proc))
	m := regexp.MustCompile(`mqgate_cluster_peer_refusals_total\{[^}]*mqgate_reason="token"[^}]*\} (\d+)`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no token refusals:\n%s", grepLines(string(body), "mqgate_cluster"))
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 7 {
		t.Fatalf("/metrics counts %d token refusals, want at least 7", n)
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
