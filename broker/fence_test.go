package broker

import (
	"context"
	"sync"
	"testing"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// termRecorder is a Replicator that records, for each write, the leader
// term its context is for (raftstore.ForTerm; 0: none given).
type termRecorder struct {
	mu    sync.Mutex
	terms []uint64
}

func (r *termRecorder) record(ctx context.Context) {
	t, _ := raftstore.TermOf(ctx)
	r.mu.Lock()
	r.terms = append(r.terms, t)
	r.mu.Unlock()
}

func (r *termRecorder) take() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.terms
	r.terms = nil
	return out
}

func (r *termRecorder) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	r.record(ctx)
	return storage.AppendResult{Status: storage.StatusOK}, nil
}

func (r *termRecorder) ProposeMeta(ctx context.Context, op raftstore.MetaOp) (storage.AppendResult, error) {
	r.record(ctx)
	return storage.AppendResult{Status: storage.StatusOK}, nil
}

func (r *termRecorder) ReadBarrier(context.Context) error { return nil }
func (r *termRecorder) Fence() uint64                     { return 0 }

// The writes one activation's services get are for that activation's
// leader term, every kind of them: appends (settled or not), topic and
// group changes, dropped queues, committed offsets. The broker's own
// writes are for no particular term (the replica's mark decides).
func TestServicesWriteForTheirTerm(t *testing.T) {
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	rec := &termRecorder{}
	base := newWrites(st, rec, nil)
	ctx := context.Background()
	write := func(w writes) {
		t.Helper()
		msg := &message.Message{Topic: "t", Body: []byte("x")}
		if _, err := w.store.Append(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := w.sends.Append(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if err := w.meta.PutTopic(metastore.Topic{Name: "t", QueueCount: 1}); err != nil {
			t.Fatal(err)
		}
		if err := w.drop.DeleteTopic(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.offsets.CommitOffset(metastore.OffsetKey{Group: "g", Topic: "t"}, 1); err != nil {
			t.Fatal(err)
		}
	}
	write(base.forTerm(7))
	got := rec.take()
	if len(got) != 5 {
		t.Fatalf("%d writes recorded, want 5", len(got))
	}
	for i, term := range got {
		if term != 7 {
			t.Fatalf("write %d of the term-7 services is for term %d (all: %v)", i, term, got)
		}
	}
	write(base)
	for i, term := range rec.take() {
		if term != 0 {
			t.Fatalf("write %d of the broker's own writes is for term %d, want none", i, term)
		}
	}
}
