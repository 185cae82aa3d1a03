package metadata

import (
	"context"
	"errors"
	"testing"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// laggingStore is a Store read from a replica that has not yet applied
// changes committed elsewhere: pending runs them, on Sync.
type laggingStore struct {
	*metastore.Store
	pending []func()
	syncs   int
	fail    error
}

func (l *laggingStore) Sync(ctx context.Context) error {
	l.syncs++
	if l.fail != nil {
		return l.fail
	}
	for _, f := range l.pending {
		f()
	}
	l.pending = nil
	return nil
}

// TestChangesDecidedOnACaughtUpStore: a store whose reads lag (a
// cluster's catalog on a member that has not yet applied a deletion made
// through another) is caught up before a creation decides whether the
// name is taken and before a put keeps what the stored one holds; if it
// cannot catch up, the change is refused as unavailable and nothing is
// written.
func TestChangesDecidedOnACaughtUpStore(t *testing.T) {
	ctx := context.Background()
	st, err := metastore.Open(vfs.NewMem(), "/meta", metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ls := &laggingStore{Store: st}
	s := New(Config{}, ls, nil)
	if _, err := s.CreateTopic(ctx, model.Topic{Name: "orders", Queues: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateGroup(ctx, model.Group{Name: "billing"}); err != nil {
		t.Fatal(err)
	}

	// Deleted elsewhere, not yet applied here.
	ls.pending = append(ls.pending,
		func() { _ = st.DeleteTopic("orders") },
		func() { _ = st.DeleteGroup("billing") })
	if _, err := s.CreateTopic(ctx, model.Topic{Name: "orders", Queues: 2}); err != nil {
		t.Fatalf("create after a deletion made elsewhere: %v", err)
	}
	if got, _ := st.Topic("orders"); got.QueueCount != 2 {
		t.Fatalf("created again with %d queues, want 2", got.QueueCount)
	}
	if _, err := s.CreateGroup(ctx, model.Group{Name: "billing"}); err != nil {
		t.Fatalf("create group after a deletion made elsewhere: %v", err)
	}

	// A put keeps the creation time of what was committed elsewhere.
	ls.pending = append(ls.pending, func() { _ = st.PutTopic(metastore.Topic{Name: "late", QueueCount: 1, CreateTime: 1234}) })
	if _, _, err := s.PutTopic(ctx, model.Topic{Name: "late", Queues: 3}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Topic("late"); got.CreateTime != 1234 || got.QueueCount != 3 {
		t.Fatalf("put over a topic created elsewhere: %+v, want its creation time 1234 and 3 queues", got)
	}

	// A store that cannot catch up refuses the change.
	ls.fail = errors.New("no leader")
	before := ls.syncs
	_, err = s.CreateTopic(ctx, model.Topic{Name: "fresh"})
	if mqerr.KindOf(err) != mqerr.KindUnavailable {
		t.Fatalf("create while the store cannot catch up: %v, want unavailable", err)
	}
	if _, ok := st.Topic("fresh"); ok {
		t.Fatal("a refused creation was written")
	}
	if _, err := s.PutGroup(ctx, model.Group{Name: "other"}); mqerr.KindOf(err) != mqerr.KindUnavailable {
		t.Fatalf("put group while the store cannot catch up: %v, want unavailable", err)
	}
	if ls.syncs != before+2 {
		t.Fatalf("%d syncs for two changes", ls.syncs-before)
	}
}
