package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
	"google.golang.org/protobuf/proto"
)

// testCluster is a group of in-process members on loopback addresses.
type testCluster struct {
	t       testing.TB
	id      string
	addrs   map[uint64]string
	members map[uint64]*member
	persist uint64 // Options.PersistEvery
	snap    uint64 // Config.SnapshotEvery (KeepEntries is half of it)
	staging string // storage.Options.StagingDir ("" is "off")
	timeout time.Duration
	token   string // Config.Token
	// tls is member id's Config.TLS (nil: plaintext for every member).
	tls     func(id uint64) *TLS
	joining map[uint64]bool
	// fs, when set, is member id's store file system (nil: the OS's).
	fs func(id uint64) vfs.FS
}

type member struct {
	id   uint64
	dir  string
	rep  *raftstore.Replica
	node *Node
}

var quiet = testLogger()

// testToken is the peer token of a test group that sets neither a token
// nor TLS (a member must authenticate its peers).
const testToken = "test-peer-token-0123456789"

func testLogger() *slog.Logger {
	if os.Getenv("PEER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

func storeOpts() storage.Options {
	return storage.Options{
		SegmentSize: 64 << 10, MaxBodySize: 8 << 10, MaxRecordSize: 10 << 10,
		FlushMode: storage.FlushAsync, StagingDir: "off", Logger: quiet,
		CheckpointInterval: time.Hour, RetentionInterval: time.Hour, MetaFlushInterval: time.Hour,
		RetentionTime: -1, DiskUsagePercent: -1, FlushInterval: 5 * time.Millisecond,
	}
}

// newTestCluster starts n members.
func newTestCluster(t testing.TB, n int, persistEvery uint64) *testCluster {
	return newTestClusterWith(t, n, testCluster{persist: persistEvery, timeout: 3 * time.Second})
}

// newTestClusterWith starts n members with o's persist, snap and
// timeout.
func newTestClusterWith(t testing.TB, n int, o testCluster) *testCluster {
	t.Helper()
	c := &testCluster{t: t, id: "test-" + t.Name(), addrs: map[uint64]string{}, members: map[uint64]*member{},
		persist: o.persist, snap: o.snap, timeout: o.timeout, staging: o.staging, token: o.token, tls: o.tls, fs: o.fs}
	lis := map[uint64]net.Listener{}
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := uint64(i + 1)
		lis[id], c.addrs[id] = l, l.Addr().String()
	}
	root := t.TempDir()
	for id, l := range lis {
		c.start(id, filepath.Join(root, fmt.Sprint(id)), l)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if m.node != nil {
				m.node.Stop()
				m.rep.Close(context.Background())
			}
		}
	})
	return c
}

func (c *testCluster) start(id uint64, dir string, l net.Listener) *member {
	c.t.Helper()
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", c.addrs[id]); err != nil {
			c.t.Fatal(err)
		}
	}
	so := storeOpts()
	if c.staging != "" {
		so.StagingDir = c.staging
	}
	if c.fs != nil {
		so.FS = c.fs(id)
	}
	rep, err := raftstore.OpenReplica(filepath.Join(dir, "replica"), raftstore.Options{
		Store: so, StoreHost: "cluster:8081", CommitTimeout: c.timeout, PersistEvery: c.persist, Logger: quiet})
	if err != nil {
		c.t.Fatal(err)
	}
	var tlsCfg *TLS
	if c.tls != nil {
		tlsCfg = c.tls(id)
	}
	token := c.token
	if token == "" && tlsCfg == nil {
		token = testToken // a member must authenticate its peers
	}
	node, err := Start(Config{ClusterID: c.id, NodeID: id, Peers: maps.Clone(c.addrs), Join: c.joining[id], WALDir: filepath.Join(dir, "wal"), Listener: l,
		TickInterval: 20 * time.Millisecond, ElectionTicks: 10, SnapshotEvery: c.snap, KeepEntries: c.snap / 2, Info: testInfo(id), Token: token, TLS: tlsCfg, Logger: quiet}, rep)
	if err != nil {
		rep.Close(context.Background())
		c.t.Fatal(err)
	}
	rep.Attach(node)
	m := &member{id: id, dir: dir, rep: rep, node: node}
	c.members[id] = m
	return m
}

// testInfo is member id's MemberInfo in a test group. Odd members say
// their remoting listener reads a relay's greeting; even ones answer as a
// member of a version without it does.
func testInfo(id uint64) MemberInfo {
	return MemberInfo{GRPC: fmt.Sprintf("10.0.0.%d:8081", id), HTTP: fmt.Sprintf("10.0.0.%d:8080", id), Remoting: fmt.Sprintf("10.0.0.%d:9876", id),
		RemotingGreeting: id%2 == 1}
}

// kill stops a member the way a killed process would: the store is
// abandoned without recording its applied position.
func (c *testCluster) kill(id uint64) {
	m := c.members[id]
	m.node.Stop()
	m.rep.Abandon()
	m.node = nil
}

func (c *testCluster) restart(id uint64) *member { return c.start(id, c.members[id].dir, nil) }

// stopAll stops every running member cleanly.
func (c *testCluster) stopAll() {
	for _, m := range c.members {
		if m.node != nil {
			if err := m.node.Stop(); err != nil {
				c.t.Errorf("stop %d: %v", m.id, err)
			}
			if err := m.rep.Close(context.Background()); err != nil {
				c.t.Errorf("close %d: %v", m.id, err)
			}
			m.node = nil
		}
	}
}

// waitFor polls cond until it holds, failing after 20s.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leader waits for a leader all running members agree on.
func (c *testCluster) leader() *member {
	c.t.Helper()
	var l *member
	c.waitFor("a leader", func() bool {
		l = nil
		for _, m := range c.members {
			if m.node != nil && m.node.IsLeader() {
				l = m
			}
		}
		if l == nil {
			return false
		}
		for _, m := range c.members {
			if m.node != nil && m.node.Leader() != l.id {
				return false
			}
		}
		return true
	})
	return l
}

// converged waits until every running member applied as far as want.
func (c *testCluster) converged(want uint64) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("every member to apply %d", want), func() bool {
		for _, m := range c.members {
			if m.node != nil && m.rep.Applied() < want {
				return false
			}
		}
		return true
	})
}

func testMsg(i int) *message.Message {
	m := &message.Message{Topic: []string{"orders", "audit"}[i%2], QueueID: int32(i % 3), BornTime: 1_000 + int64(i), BornHost: "client:1",
		Body: []byte(fmt.Sprintf("body-%d", i))}
	m.Set(message.PropUniqKey, fmt.Sprintf("id-%d", i))
	m.Set(message.PropTags, fmt.Sprintf("tag%d", i%4))
	return m
}

// appendN appends messages from..to through m, k at a time concurrently,
// and returns the ids acknowledged.
func appendN(t testing.TB, m *member, from, to int) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		ids  []string
		wg   sync.WaitGroup
		errs []error
	)
	sem := make(chan struct{}, 4)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			msg := testMsg(i)
			res, err := m.rep.Append(context.Background(), msg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if res.Status != storage.StatusOK || len(res.Entries) != 1 {
				errs = append(errs, fmt.Errorf("receipt %+v", res))
				return
			}
			ids = append(ids, msg.UniqKey())
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(errs), errs[0])
	}
	return ids
}

// contents reads every message of the test topics from m's store (every
// one applied before the call), by id, checking that every queue's
// offsets are dense and no id appears twice.
func contents(t testing.TB, m *member) map[string]bool {
	t.Helper()
	s := m.rep.Store()
	// Everything applied so far is answered; LogRange's written end may
	// not cover it yet (with a staging ring the flusher writes it out
	// after the apply).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDispatched(ctx, s.Answered()); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, topic := range []string{"orders", "audit"} {
		for q := int32(0); q < 3; q++ {
			lo, hi := s.QueueRange(topic, q)
			for off := lo; off < hi; {
				ms, next, err := s.ReadMessages(topic, q, off, 64)
				if err != nil {
					t.Fatal(err)
				}
				for i, msg := range ms {
					if msg.QueueOffset != off+int64(i) {
						t.Fatalf("member %d: %s/%d: offset %d at %d", m.id, topic, q, msg.QueueOffset, off+int64(i))
					}
					if out[msg.UniqKey()] {
						t.Fatalf("member %d: message %s stored twice", m.id, msg.UniqKey())
					}
					out[msg.UniqKey()] = true
				}
				off = next
			}
		}
	}
	return out
}

// sameStores compares the commit-log segment files of every member
// (stopped) byte for byte.
func (c *testCluster) sameStores() {
	c.t.Helper()
	var ref map[string][]byte
	var refID uint64
	for _, m := range c.members {
		files := map[string][]byte{}
		dir := filepath.Join(m.dir, "replica", "store", "commitlog")
		ents, err := os.ReadDir(dir)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					c.t.Fatal(err)
				}
				files[e.Name()] = b
			}
		}
		if ref == nil {
			ref, refID = files, m.id
			if len(files) == 0 {
				c.t.Fatal("no segments")
			}
			continue
		}
		if len(files) != len(ref) {
			c.t.Fatalf("member %d has %d segments, member %d %d", m.id, len(files), refID, len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(files[name], b) {
				c.t.Fatalf("segment %s of member %d differs from member %d's (%d against %d bytes)", name, m.id, refID, len(files[name]), len(b))
			}
		}
	}
}

func TestReplicatedAppendsByteIdentical(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ids := appendN(t, l, 0, 300)
	c.converged(l.rep.Applied())
	want := contents(t, l)
	if len(want) != len(ids) {
		t.Fatalf("leader holds %d messages, %d acknowledged", len(want), len(ids))
	}
	for _, m := range c.members {
		got := contents(t, m)
		if len(got) != len(want) {
			t.Fatalf("member %d holds %d messages, leader %d", m.id, len(got), len(want))
		}
		for _, topic := range []string{"orders", "audit"} {
			for q := int32(0); q < 3; q++ {
				llo, lhi := l.rep.Store().QueueRange(topic, q)
				lo, hi := m.rep.Store().QueueRange(topic, q)
				if lo != llo || hi != lhi {
					t.Fatalf("member %d %s/%d: [%d,%d), leader [%d,%d)", m.id, topic, q, lo, hi, llo, lhi)
				}
			}
		}
	}
	c.stopAll()
	c.sameStores()
}

// TestCommitOnlyAppendsReplaced: under a stream of appends the leader
// holds back the appends that would only tell a follower a newer commit
// index, and the next append with entries carries it instead; every
// member still applies everything.
func TestCommitOnlyAppendsReplaced(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	appendN(t, l, 0, 300)
	c.converged(l.rep.Applied())
	st, err := l.node.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := st.Work
	if w.CommitsHeld == 0 || w.CommitsReplaced == 0 || w.CommitsReplaced > w.CommitsHeld {
		t.Fatalf("leader's work %+v: want commit-only appends held back and replaced by later appends", w)
	}
	t.Logf("leader: %d commit-only appends held, %d replaced, %d raft messages sent for %d entries", w.CommitsHeld, w.CommitsReplaced, w.MessagesSent, w.Proposals)
}

func TestFollowerAppendNotLeader(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	for _, m := range c.members {
		if m == l {
			continue
		}
		_, err := m.rep.Append(context.Background(), testMsg(1))
		var nl *raftstore.NotLeaderError
		if !errors.Is(err, raftstore.ErrNotLeader) || !errors.As(err, &nl) {
			t.Fatalf("follower append: %v, want not-leader", err)
		}
		if nl.LeaderID != l.id || nl.LeaderAddr != c.addrs[l.id] {
			t.Fatalf("not-leader names %d at %s, leader is %d at %s", nl.LeaderID, nl.LeaderAddr, l.id, c.addrs[l.id])
		}
	}
	if got := contents(t, l); len(got) != 0 {
		t.Fatalf("refused appends stored: %v", got)
	}
}

func TestLeaderKilledFailover(t *testing.T) {
	c := newTestCluster(t, 3, 16)
	old := c.leader()
	acked := appendN(t, old, 0, 120)
	c.kill(old.id)
	l := c.leader()
	if l.id == old.id {
		t.Fatal("killed member still leads")
	}
	// An entry of the new leader's term commits everything before it.
	acked = append(acked, appendN(t, l, 120, 121)...)
	c.converged(l.rep.Applied())
	for _, m := range c.members {
		if m.node == nil {
			continue
		}
		have := contents(t, m)
		for _, id := range acked {
			if !have[id] {
				t.Fatalf("acknowledged message %s missing on member %d after failover", id, m.id)
			}
		}
	}
	acked = append(acked, appendN(t, l, 121, 200)...)
	back := c.restart(old.id)
	c.leader()
	acked = append(acked, appendN(t, c.leader(), 200, 240)...)
	c.converged(c.leader().rep.Applied())
	have := contents(t, back)
	if len(have) != len(acked) {
		t.Fatalf("restarted member holds %d messages, %d acknowledged", len(have), len(acked))
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("restarted member lacks %s", id)
		}
	}
	c.stopAll()
	c.sameStores()
}

func TestNoQuorumNeverOK(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{timeout: time.Second})
	l := c.leader()
	appendN(t, l, 0, 10)
	for _, m := range c.members {
		if m != l {
			c.kill(m.id)
		}
	}
	before := contents(t, l)
	// The first appends may meet the leader before it steps down (its
	// entries cannot commit) or after (no leader): either way an error
	// within the deadline, never OK.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
		t0 := time.Now()
		_, err := l.rep.Append(ctx, testMsg(100+i))
		cancel()
		if err == nil {
			t.Fatal("append without a quorum answered OK")
		}
		if !errors.Is(err, raftstore.ErrNoQuorum) && !errors.Is(err, raftstore.ErrLeadershipLost) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("append without a quorum: %v", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("append without a quorum took %v", d)
		}
	}
	c.waitFor("the leader to step down", func() bool { return !l.node.IsLeader() })
	t0 := time.Now()
	_, err := l.rep.Append(context.Background(), testMsg(200))
	if !errors.Is(err, raftstore.ErrNoQuorum) {
		t.Fatalf("append with no leader: %v, want ErrNoQuorum", err)
	}
	if d := time.Since(t0); d < c.timeout/2 || d > c.timeout+time.Second {
		t.Fatalf("no-quorum answer after %v, deadline %v", d, c.timeout)
	}
	if after := contents(t, l); len(after) != len(before) {
		t.Fatalf("%d messages stored without a quorum", len(after)-len(before))
	}
}

// Every member crashes with entries applied past its recorded position;
// on restart each applies the raft log from there again: nothing twice,
// nothing skipped, still byte-identical.
func TestCrashReapplyExactlyOnce(t *testing.T) {
	t.Run("no-staging", func(t *testing.T) { testCrashReapply(t, "") })
	if vfs.IsTmpfs("/dev/shm") {
		// The stores' staging rings hold what the crash left unwritten.
		t.Run("staging", func(t *testing.T) { testCrashReapply(t, "/dev/shm") })
	}
}

func testCrashReapply(t *testing.T, staging string) {
	// The raft log is compacted at every recorded position.
	c := newTestClusterWith(t, 3, testCluster{persist: 50, snap: 20, timeout: 3 * time.Second, staging: staging})
	l := c.leader()
	acked := appendN(t, l, 0, 150)
	c.converged(l.rep.Applied())
	// The appends share entries as they come, so the last one may end
	// exactly at a recorded position: one more entry then goes past it.
	for i := 0; i < 3 && l.rep.Persisted() >= l.rep.Applied(); i++ {
		acked = append(acked, appendN(t, l, 1000+i, 1001+i)...)
		c.converged(l.rep.Applied())
	}
	for id, m := range c.members {
		if m.rep.Persisted() == 0 || m.rep.Persisted() >= m.rep.Applied() {
			t.Fatalf("member %d: recorded %d, applied %d: nothing to apply again", id, m.rep.Persisted(), m.rep.Applied())
		}
		c.kill(id)
		snaps, err := wal.ValidSnapshotEntries(zap.NewNop(), filepath.Join(m.dir, "wal"))
		if err != nil || len(snaps) == 0 || snaps[len(snaps)-1].GetIndex() == 0 {
			t.Fatalf("member %d: no raft log compaction recorded (%d snapshots, %v)", id, len(snaps), err)
		}
	}
	for id := range c.members {
		m := c.restart(id)
		if rec := m.rep.Store().Recovery(); rec.Truncated == 0 {
			t.Fatalf("member %d: the store kept what it applied past its recorded position: %+v", id, rec)
		}
	}
	l = c.leader()
	acked = append(acked, appendN(t, l, 150, 200)...)
	c.converged(l.rep.Applied())
	for _, m := range c.members {
		holdsAll(t, m, acked, 150)
	}
	c.stopAll()
	c.sameStores()
}

// holdsAll fails unless m holds exactly the acknowledged messages. The
// failure names each one missing, its queue, and whether it was
// acknowledged before the crash (ids below crashAt) or after, with the
// member's positions and what a second read finds once everything its
// store answered is readable through the queues.
func holdsAll(t testing.TB, m *member, acked []string, crashAt int) {
	t.Helper()
	have := contents(t, m)
	missing := missingIDs(acked, have, crashAt)
	if len(missing) == 0 && len(have) == len(acked) {
		return
	}
	s := m.rep.Store()
	_, written := s.LogRange()
	st := s.Stats()
	report := fmt.Sprintf("member %d holds %d messages, %d acknowledged; missing %d: %s; applied %d (recorded %d), log written %d, answered %d, durable %d, dispatched %d, queues %s",
		m.id, len(have), len(acked), len(missing), strings.Join(missing, ", "), m.rep.Applied(), m.rep.Persisted(),
		written, s.Answered(), st.Durable, st.Dispatched, queueRanges(s))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDispatched(ctx, s.Answered()); err != nil {
		t.Fatalf("%s; waiting for the answered records: %v", report, err)
	}
	again := contents(t, m)
	t.Fatalf("%s; read again once every answered record is dispatched: %d messages, missing %v", report, len(again), missingIDs(acked, again, crashAt))
}

// missingIDs lists the ids of acked that have lacks, each with its queue
// and the part of the test that appended it.
func missingIDs(acked []string, have map[string]bool, crashAt int) []string {
	var out []string
	for _, id := range acked {
		if have[id] {
			continue
		}
		var i int
		if _, err := fmt.Sscanf(id, "id-%d", &i); err != nil {
			out = append(out, id)
			continue
		}
		msg, part := testMsg(i), "after the crash"
		if i < crashAt {
			part = "before the crash"
		}
		out = append(out, fmt.Sprintf("%s (%s/%d, %s)", id, msg.Topic, msg.QueueID, part))
	}
	return out
}

// queueRanges lists the [min, next) offsets of the test queues.
func queueRanges(s *storage.Store) string {
	var b strings.Builder
	for _, topic := range []string{"orders", "audit"} {
		for q := int32(0); q < 3; q++ {
			lo, hi := s.QueueRange(topic, q)
			fmt.Fprintf(&b, "%s/%d [%d,%d) ", topic, q, lo, hi)
		}
	}
	return strings.TrimSpace(b.String())
}

// raftStream opens a raft stream to member to as member from would
// (the cluster id, token and sender in md) and sends m on it; it returns
// the stream's status.
func (c *testCluster) raftStream(to uint64, md metadata.MD, m *raftpb.Message) error {
	c.t.Helper()
	conn, err := grpc.NewClient(c.addrs[to], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := clusterv1.NewPeerServiceClient(conn).Raft(metadata.NewOutgoingContext(ctx, md))
	if err != nil {
		return err
	}
	b, err := proto.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := s.Send(&clusterv1.RaftRequest{Messages: []*clusterv1.RaftMessage{{Group: 0, Message: b}}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = s.CloseAndRecv()
	return err
}

// A raft stream that names another cluster, carries no token, comes from
// no member, or carries a message of another sender is refused before
// any message of it reaches raft, and counted; one from a member of
// this cluster is taken.
func TestRaftStreamRefused(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	f := c.follower(l)
	// A heartbeat of a far higher term: taken, it makes the leader step
	// down.
	beat := func(from uint64) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(l.id), From: new(from), Term: new(uint64(1000))}
	}
	md := func(kv ...string) metadata.MD { return metadata.Pairs(kv...) }
	sender := fmt.Sprint(f.id)
	for _, tc := range []struct {
		name   string
		md     metadata.MD
		m      *raftpb.Message
		code   codes.Code
		reason string
	}{
		{"no token", md(mdClusterID, c.id, mdFromNode, sender), beat(f.id), codes.Unauthenticated, RefusedToken},
		{"another token", md(mdToken, "guess", mdClusterID, c.id, mdFromNode, sender), beat(f.id), codes.Unauthenticated, RefusedToken},
		{"another cluster", md(mdToken, testToken, mdClusterID, "another-cluster", mdFromNode, sender), beat(f.id), codes.PermissionDenied, RefusedCluster},
		{"no sender", md(mdToken, testToken, mdClusterID, c.id), beat(f.id), codes.PermissionDenied, RefusedMember},
		{"sender not a member", md(mdToken, testToken, mdClusterID, c.id, mdFromNode, "9"), beat(9), codes.PermissionDenied, RefusedMember},
		{"message of another sender", md(mdToken, testToken, mdClusterID, c.id, mdFromNode, sender), beat(9), codes.PermissionDenied, RefusedMember},
	} {
		before := l.node.Refusals()[tc.reason]
		if err := c.raftStream(l.id, tc.md, tc.m); status.Code(err) != tc.code {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.code)
		}
		if got := l.node.Refusals()[tc.reason]; got != before+1 {
			t.Fatalf("%s: %d refusals for %s, want %d", tc.name, got, tc.reason, before+1)
		}
		if !l.node.IsLeader() || c.leader() != l {
			t.Fatalf("%s: a refused message changed the leader", tc.name)
		}
	}
	// The same message from a member of this cluster reaches raft.
	c.raftStream(l.id, md(mdToken, testToken, mdClusterID, c.id, mdFromNode, sender), beat(f.id))
	c.waitFor("the leader to take the message", func() bool { return !l.node.IsLeader() })
}

// lastWALFile is the newest WAL file of a member.
func lastWALFile(t *testing.T, m *member) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(m.dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") && e.Name() > last {
			last = e.Name()
		}
	}
	if last == "" {
		t.Fatal("no WAL file")
	}
	return filepath.Join(m.dir, "wal", last)
}

// A member whose raft log ends in a torn record (cut inside its last
// record, as a crash during the write leaves it) repairs it on restart,
// catches up and holds what the others hold.
func TestTornWALTailRepaired(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	acked := appendN(t, l, 0, 60)
	c.converged(l.rep.Applied())
	var f *member
	for _, m := range c.members {
		if m != l {
			f = m
			break
		}
	}
	c.kill(f.id)
	path := lastWALFile(t, f)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end < 16 {
		t.Fatal("empty WAL file")
	}
	if err := os.Truncate(path, int64(end-5)); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, appendN(t, l, 60, 80)...)
	f = c.restart(f.id)
	acked = append(acked, appendN(t, c.leader(), 80, 100)...)
	c.converged(c.leader().rep.Applied())
	have := contents(t, f)
	if len(have) != len(acked) {
		t.Fatalf("repaired member holds %d messages, %d acknowledged", len(have), len(acked))
	}
	c.stopAll()
	c.sameStores()
}

// The leader is killed while appends are in flight: each one answered OK
// is on the survivors; the others got an error, never a false OK.
func TestLeaderKilledUnderLoad(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{persist: 16, timeout: 2 * time.Second})
	old := c.leader()
	var (
		mu     sync.Mutex
		acked  []string
		failed int
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := testMsg(g*100_000 + i)
				_, err := old.rep.Append(context.Background(), m)
				mu.Lock()
				if err == nil {
					acked = append(acked, m.UniqKey())
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	c.waitFor("appends under way", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 40
	})
	c.kill(old.id)
	close(stop)
	wg.Wait()
	// An entry of the new leader's term commits everything before it.
	l := c.leader()
	appendN(t, l, 900_000, 900_001)
	c.converged(l.rep.Applied())
	for _, m := range c.members {
		if m.node == nil {
			continue
		}
		have := contents(t, m)
		for _, id := range acked {
			if !have[id] {
				t.Fatalf("message %s answered OK is missing on member %d", id, m.id)
			}
		}
	}
	t.Logf("%d answered OK, %d failed at the kill", len(acked), failed)
}

// A proposal for another of the leader's terms is refused as not leading
// before its entry is built: a member's services built in one term of its
// leadership (raftstore.Replica.MarkLeading) write nothing in another.
// One for its own term, or for any (0), is taken.
func TestProposalForAnotherTermRefused(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	l := c.leader()
	term := l.node.LeaderTerm()
	built := false
	err := l.node.Propose(testCtx(t), term+1, func() []byte { built = true; return nil })
	if !errors.Is(err, raftstore.ErrNotLeader) || built {
		t.Fatalf("a proposal for term %d at a leader of term %d: %v (built: %v), want ErrNotLeader, not built", term+1, term, err, built)
	}
	l.rep.MarkLeading(term + 1)
	if _, err := l.rep.Append(testCtx(t), testMsg(0)); !errors.Is(err, raftstore.ErrNotLeader) {
		t.Fatalf("an append marked for term %d at a leader of term %d: %v, want ErrNotLeader", term+1, term, err)
	}
	l.rep.MarkLeading(term)
	appendN(t, l, 0, 5)
	l.rep.MarkLeading(0)
	appendN(t, l, 5, 10)
	c.converged(l.rep.Applied())
	if got := contents(t, l); len(got) != 10 {
		t.Fatalf("the group holds %d messages, want the 10 proposed for the leader's term", len(got))
	}
}
