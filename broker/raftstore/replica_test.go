package raftstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

func replicaOpts() Options {
	return Options{Store: storage.Options{SegmentSize: 64 << 10, MaxBodySize: 8 << 10, MaxRecordSize: 10 << 10,
		StagingDir: "off", CheckpointInterval: time.Hour, RetentionInterval: time.Hour, MetaFlushInterval: time.Hour,
		RetentionTime: -1, DiskUsagePercent: -1, Logger: slog.New(slog.DiscardHandler)},
		PersistEvery: 4, Logger: slog.New(slog.DiscardHandler)}
}

// testGeo is the geometry of replicaOpts' store.
var testGeo = geometry{segmentSize: 64 << 10, maxRecordSize: 10 << 10, maxBodySize: 8 << 10}

// entries encodes n one-message append entries from another proposer.
func entries(t *testing.T, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i, m := range testMsgs(n) {
		b, err := encodeAppend(&appendEntry{proposer: 99, seq: uint64(i), storeTime: 1_700_000_000_000 + int64(i), geo: testGeo, storeHost: "h:1", msgs: []*message.Message{m}}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func queueLen(r *Replica) int64 {
	_, end := r.Store().LogRange()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Store().WaitDispatched(ctx, end); err != nil {
		panic(err)
	}
	_, a := r.Store().QueueRange("t", 0)
	_, b := r.Store().QueueRange("t", 1)
	return a + b
}

// A replica abandoned past its recorded position reopens there: entries
// handed over again are applied once, already applied ones skipped, a
// gap refused.
func TestReplicaApplyAfterCrash(t *testing.T) {
	dir := t.TempDir()
	ents := entries(t, 10)
	r, err := OpenReplica(dir, replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(1, nil); err != nil { // an entry without a batch
		t.Fatal(err)
	}
	for i, e := range ents {
		if err := r.Apply(uint64(i+2), e); err != nil {
			t.Fatal(err)
		}
	}
	if r.Applied() != 11 || r.Persisted() != 8 {
		t.Fatalf("applied %d, recorded %d; want 11, 8", r.Applied(), r.Persisted())
	}
	if n := queueLen(r); n != 10 {
		t.Fatalf("%d messages stored, want 10", n)
	}
	r.Abandon()

	r, err = OpenReplica(dir, replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if r.Applied() != 8 || queueLen(r) != 7 {
		t.Fatalf("reopened at %d with %d messages; want 8 and 7", r.Applied(), queueLen(r))
	}
	for i := 4; i < 10; i++ { // indexes 6..11: 6..8 already applied
		if err := r.Apply(uint64(i+2), ents[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n := queueLen(r); n != 10 || r.Applied() != 11 {
		t.Fatalf("%d messages, applied %d; want 10, 11", n, r.Applied())
	}
	if err := r.Apply(13, ents[0]); err == nil || r.Failed() == nil {
		t.Fatal("an entry after a gap was applied")
	}
	if _, err := r.Append(context.Background(), testMsgs(1)...); !errors.Is(err, ErrStopped) {
		t.Fatalf("append on a stopped replica: %v", err)
	}
}

// An entry the store refuses for its content is skipped by the replica
// (every member refuses it alike) and answered with the store's error.
func TestReplicaRejectsOversizedEntryAlike(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	big := &message.Message{Topic: "t", Body: make([]byte, 9<<10)}
	b, err := encodeAppend(&appendEntry{proposer: 1, seq: 1, storeTime: 5, geo: testGeo, msgs: []*message.Message{big}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(1, b); err != nil {
		t.Fatalf("content error stopped the replica: %v", err)
	}
	if r.Applied() != 1 || queueLen(r) != 0 {
		t.Fatalf("applied %d with %d messages", r.Applied(), queueLen(r))
	}
}

// A member configured unlike the proposer stops rather than write bytes
// the others do not.
func TestReplicaStopsOnOtherGeometry(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	geo := testGeo
	geo.segmentSize *= 2
	b, err := encodeAppend(&appendEntry{proposer: 1, seq: 1, storeTime: 5, geo: geo, msgs: testMsgs(1)}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(1, b); err == nil || r.Failed() == nil {
		t.Fatal("an entry of another geometry was applied")
	}
	if r.Applied() != 0 || queueLen(r) != 0 {
		t.Fatalf("applied %d with %d messages", r.Applied(), queueLen(r))
	}
}

// loopRaft takes proposals into a log the test applies by hand (and
// their terms into terms, when set).
type loopRaft struct {
	proposed chan []byte
	terms    chan uint64
}

func (l loopRaft) Propose(_ context.Context, term uint64, build func() []byte) error {
	if data := build(); data != nil {
		l.proposed <- data
		if l.terms != nil {
			l.terms <- term
		}
	}
	return nil
}

func (loopRaft) ReadIndex(context.Context) error { return nil }

// Once raft has an entry, Append waits for its outcome whatever the
// caller's context does: the caller that went away still learns. A
// plain append gives up at the commit timeout (the entry may still
// commit, and no memory hangs on it); one that awaits its outcome
// (AwaitOutcome) waits past it, and only its context's deadline leaves
// the outcome uncertain, counted.
func TestAppendOutcomeOutlivesCaller(t *testing.T) {
	o := replicaOpts()
	o.CommitTimeout = 200 * time.Millisecond
	r, err := OpenReplica(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	lr := loopRaft{proposed: make(chan []byte, 1)}
	r.Attach(lr)
	ctx, cancel := context.WithCancel(AwaitOutcome(context.Background()))
	done := make(chan error, 1)
	go func() {
		_, err := r.Append(ctx, testMsgs(1)...)
		done <- err
	}()
	data := <-lr.proposed
	cancel()
	time.Sleep(2 * o.CommitTimeout) // past the commit timeout: an awaiting append still waits
	if err := r.Apply(1, data); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("append committed after its caller went away and past the commit timeout: %v, want OK", err)
	}

	_, err = r.Append(context.Background(), testMsgs(1)...)
	<-lr.proposed // never applied
	if !errors.Is(err, ErrNoQuorum) || r.Uncertain() != 0 {
		t.Fatalf("plain append never committed: %v, %d uncertain; want ErrNoQuorum, none", err, r.Uncertain())
	}

	changed := r.UncertainChanges()
	dctx, dcancel := context.WithTimeout(AwaitOutcome(context.Background()), 300*time.Millisecond)
	defer dcancel()
	_, err = r.Append(dctx, testMsgs(1)...)
	<-lr.proposed // never applied
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("awaiting append never committed: %v, want ErrNoQuorum", err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("UncertainChanges not closed after an uncertain outcome")
	}
	if r.Uncertain() != 1 {
		t.Fatalf("%d uncertain outcomes, want 1", r.Uncertain())
	}
}

// A member whose size limits are below the group's meets a record over
// its own limit: it stops and says how to go on, instead of skipping the
// entry the others store (it would then hold other offsets and ids).
func TestReplicaStopsOnSmallerLimits(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	geo := testGeo
	geo.maxRecordSize, geo.maxBodySize = 40<<10, 32<<10
	big := &message.Message{Topic: "t", Body: make([]byte, 20<<10)}
	b, err := encodeAppend(&appendEntry{proposer: 1, seq: 1, storeTime: 5, geo: geo, msgs: []*message.Message{big}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Apply(1, b)
	if err == nil || r.Failed() == nil || !strings.Contains(err.Error(), "restart it with") {
		t.Fatalf("an entry over this member's limits: %v", err)
	}
	if r.Undecodable() != 0 || r.Applied() != 0 {
		t.Fatalf("skipped as undecodable (%d) or applied (%d)", r.Undecodable(), r.Applied())
	}
}

// A replica's store does not fsync what it applies, whatever flush mode
// it is given: the raft logs hold every committed entry fsynced already,
// and an fsync per entry would hold up the raft loop that applies it.
// Here every fsync of the store fails, so an apply that waited for one
// would fail too.
func TestReplicaAppliesWithoutStoreFsync(t *testing.T) {
	o := replicaOpts()
	o.Store.FlushMode = storage.FlushSync
	o.PersistEvery = 1 << 20
	syncs := atomic.Int64{}
	o.Store.FS = vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "commitlog") {
			syncs.Add(1)
			return errors.New("fsync refused by the test")
		}
		return nil
	})
	r, err := OpenReplica("/replica", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Abandon()
	for i, e := range entries(t, 5) {
		if err := r.Apply(uint64(i+1), e); err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
	}
	if n := queueLen(r); n != 5 || r.Applied() != 5 {
		t.Fatalf("%d messages, applied %d; want 5, 5", n, r.Applied())
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("the store fsynced its commit log %d times while applying", n)
	}
}

// openTermReplica opens a replica over a loopRaft that records the terms
// of its proposals; nothing is applied, so each proposal gives up after
// a short commit timeout.
func openTermReplica(t *testing.T) (*Replica, loopRaft) {
	t.Helper()
	o := replicaOpts()
	o.CommitTimeout = 20 * time.Millisecond
	r, err := OpenReplica(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	lr := loopRaft{proposed: make(chan []byte, 8), terms: make(chan uint64, 8)}
	r.Attach(lr)
	return r, lr
}

// After MarkLeading(term), what a Replica proposes (appends, changes,
// the barrier) is for that leader term alone, until the next
// MarkLeading; a change another member forwarded is for any term.
func TestProposalsFencedToTheMarkedTerm(t *testing.T) {
	r, lr := openTermReplica(t)
	ctx := context.Background()
	change, err := EncodeChange(MetaOp{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "t", QueueCount: 2}})
	if err != nil {
		t.Fatal(err)
	}
	proposedFor := func(propose func()) uint64 {
		t.Helper()
		go propose()
		<-lr.proposed
		return <-lr.terms
	}
	for _, term := range []uint64{7, 9} {
		r.MarkLeading(term)
		if got := proposedFor(func() { _, _ = r.Append(ctx, testMsgs(1)...) }); got != term {
			t.Fatalf("an append after MarkLeading(%d) proposed for term %d", term, got)
		}
		if got := proposedFor(func() { _ = r.Barrier(ctx) }); got != term {
			t.Fatalf("a barrier after MarkLeading(%d) proposed for term %d", term, got)
		}
		if got := proposedFor(func() { _, _ = r.ProposeForwarded(ctx, change) }); got != 0 {
			t.Fatalf("a forwarded change after MarkLeading(%d) proposed for term %d, want any (0)", term, got)
		}
	}
}

// An append or change made for a leader term (ForTerm) other than the
// replica's mark is refused as not leading, and nothing of it proposed
// (the queued appends are sorted out as their entry is built); one for
// the marked term is proposed for it.
func TestProposalsForAnotherTermRefused(t *testing.T) {
	r, lr := openTermReplica(t)
	r.MarkLeading(7)
	stale := ForTerm(context.Background(), 5)
	if _, err := r.Append(stale, testMsgs(1)...); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("an append for term 5 on a replica marked 7: %v, want ErrNotLeader", err)
	}
	select {
	case data := <-lr.proposed:
		t.Fatalf("an append for term 5 was proposed (%d bytes)", len(data))
	default:
	}
	// A change goes to raft with its term, which a leader of term 7
	// refuses (gateway/peer's TestProposalForAnotherTermRefused).
	go func() { _, _ = r.ProposeMeta(stale, MetaOp{Kind: MetaBarrier}) }()
	<-lr.proposed
	if got := <-lr.terms; got != 5 {
		t.Fatalf("a change made for term 5 was proposed for term %d", got)
	}
	go func() { _, _ = r.Append(ForTerm(context.Background(), 7), testMsgs(1)...) }()
	<-lr.proposed
	if got := <-lr.terms; got != 7 {
		t.Fatalf("an append made for term 7 was proposed for term %d", got)
	}
}
