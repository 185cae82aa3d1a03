package peer

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/broker/raftstore"
)

// countingListener counts the bytes read from the connections it
// accepts.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// startSingle starts a one-member group on a counting listener.
func startSingle(t *testing.T, token string) (*Node, *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	dir := t.TempDir()
	rep, err := raftstore.OpenReplica(filepath.Join(dir, "replica"), raftstore.Options{Store: storeOpts(), StoreHost: "single:8081", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(Config{ClusterID: "single", NodeID: 1, Peers: map[uint64]string{1: l.Addr().String()}, WALDir: filepath.Join(dir, "wal"),
		Listener: cl, TickInterval: 20 * time.Millisecond, Token: token, Logger: quiet}, rep)
	if err != nil {
		rep.Close(context.Background())
		t.Fatal(err)
	}
	rep.Attach(n)
	t.Cleanup(func() {
		n.Stop()
		rep.Close(context.Background())
	})
	return n, cl
}

// A member without peer authentication does not start.
func TestStartNeedsPeerAuth(t *testing.T) {
	rep, err := raftstore.OpenReplica(filepath.Join(t.TempDir(), "replica"), raftstore.Options{Store: storeOpts(), StoreHost: "x:1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close(context.Background())
	_, err = Start(Config{ClusterID: "open", NodeID: 1, Peers: map[uint64]string{1: "127.0.0.1:0"}, WALDir: filepath.Join(t.TempDir(), "wal"), Logger: quiet}, rep)
	if !errors.Is(err, ErrNoPeerAuth) {
		t.Fatalf("Start without a token or TLS: %v, want ErrNoPeerAuth", err)
	}
}

// A call without the token is refused before its body is read: of a
// request of 8 MiB, the member reads no more than a flow-control window
// or so. A call with the token is bounded by its method: a control
// request of 100 KiB is refused.
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	n, cl := startSingle(t, testToken)
	conn, err := grpc.NewClient(cl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := testCtx(t)
	big := wrapperspb.Bytes(make([]byte, 8<<20))
	for _, method := range []string{infoMethod, statusMethod, transferMethod, addMethod, removeMethod, proposeMethod, readIdxMethod, checkTxMethod} {
		before := cl.read.Load()
		md := metadata.Pairs(mdToken, "guess", mdClusterID, "single")
		err := conn.Invoke(metadata.NewOutgoingContext(ctx, md), method, big, new(emptypb.Empty))
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("%s with another token: %v, want Unauthenticated", method, err)
		}
		if read := cl.read.Load() - before; read > 1<<20 {
			t.Fatalf("%s with another token: the member read %d bytes of an 8 MiB request", method, read)
		}
	}
	if got := n.Refusals()[RefusedToken]; got != 8 {
		t.Fatalf("%d refusals for the token, want 8", got)
	}
	md := metadata.Pairs(mdToken, testToken, mdClusterID, "single")
	err = conn.Invoke(metadata.NewOutgoingContext(ctx, md), infoMethod, wrapperspb.Bytes(make([]byte, 100<<10)), new(wrapperspb.BytesValue))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Info of 100 KiB with the token: %v, want ResourceExhausted", err)
	}
	// Propose takes a change as large as a metadata entry, and no more.
	err = conn.Invoke(metadata.NewOutgoingContext(ctx, md), proposeMethod, wrapperspb.Bytes(make([]byte, 2<<20)), new(wrapperspb.BytesValue))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Propose of 2 MiB with the token: %v, want ResourceExhausted", err)
	}
	if got := n.Refusals()[RefusedSize]; got != 2 {
		t.Fatalf("%d refusals for size, want 2", got)
	}
	if _, err := callInfo(WithToken(ctx, testToken), conn, "single"); err != nil {
		t.Fatalf("Info with the token: %v", err)
	}
}

// A committed entry that does not decode (garbage, an unknown kind, a
// truncated batch, a metadata change that is not JSON) is applied as a
// no-op by every member: the group keeps serving, the replicas stay
// byte-identical, each member counts it, and a member restarted after it
// replays it the same way.
func TestUndecodableEntryCommitted(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	l := c.leader()
	appendN(t, l, 0, 10)
	// An append header (version 1, kind 1, proposer, seq, store time,
	// geometry, no host) announcing one record of 100 bytes, then 10.
	short := append([]byte{1, 1}, make([]byte, 8+8+8+16+2)...)
	short = append(short, 0, 0, 0, 1, 0, 0, 0, 100)
	short = append(short, make([]byte, 10)...)
	garbage := [][]byte{
		[]byte("garbage, not an entry"),
		{1, 9, 0, 0, 0}, // version 1, an unknown kind
		short,           // a batch cut short
		append([]byte{1, 2}, make([]byte, 26)...), // a metadata change without its JSON
	}
	for i, g := range garbage {
		if err := l.node.Propose(testCtx(t), 0, func() []byte { return g }); err != nil {
			t.Fatalf("propose garbage %d: %v", i, err)
		}
	}
	acked := appendN(t, l, 10, 30)
	c.converged(l.rep.Applied())
	for _, m := range c.members {
		if got := m.rep.Undecodable(); got != uint64(len(garbage)) {
			t.Fatalf("member %d counted %d undecodable entries, want %d", m.id, got, len(garbage))
		}
		if err := m.node.Err(); err != nil {
			t.Fatalf("member %d stopped: %v", m.id, err)
		}
	}
	f := c.follower(l)
	c.kill(f.id)
	f = c.restart(f.id)
	acked = append(acked, appendN(t, c.leader(), 30, 40)...)
	c.converged(c.leader().rep.Applied())
	have := contents(t, f)
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("member %d lacks %s after replaying the undecodable entries", f.id, id)
		}
	}
	c.stopAll()
	c.sameStores()
}

// A connection to the peer address that never finishes its handshake (it
// sends nothing) is closed after HandshakeTimeout.
func TestSilentPeerConnectionClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rep, err := raftstore.OpenReplica(filepath.Join(dir, "replica"), raftstore.Options{Store: storeOpts(), StoreHost: "x:1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(Config{ClusterID: "silent", NodeID: 1, Peers: map[uint64]string{1: l.Addr().String()}, WALDir: filepath.Join(dir, "wal"),
		Listener: l, Token: testToken, HandshakeTimeout: 200 * time.Millisecond, Logger: quiet}, rep)
	if err != nil {
		t.Fatal(err)
	}
	rep.Attach(n)
	defer func() { n.Stop(); rep.Close(context.Background()) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1024)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a silent connection was still open after 10 s")
			}
			return // closed by the member
		}
	}
}
