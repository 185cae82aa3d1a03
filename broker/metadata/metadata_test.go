package metadata

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TestUnpersistedMetadataIsNotUsed: while the meta directory refuses
// writes, creating a topic or group (explicitly, on first use with
// auto-create, or a group's dead-letter topic) fails as store-unavailable,
// and nothing that failed is then found: a send cannot be accepted for a
// topic a restart would not know.
func TestUnpersistedMetadataIsNotUsed(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	st, err := metastore.Open(efs, "/meta", metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{AutoCreate: true}, st, nil)
	if _, err := s.CreateGroup(ctx, model.Group{Name: "existing"}); err != nil {
		t.Fatal(err)
	}
	efs.SetInject(func(op vfs.Op, path string) error {
		if strings.HasPrefix(path, "/meta/") && (op == vfs.OpCreate || op == vfs.OpWrite) {
			return syscall.EROFS
		}
		return nil
	})
	unavailable := func(what string, err error) {
		t.Helper()
		if mqerr.KindOf(err) != mqerr.KindStoreUnavailable || !errors.Is(err, syscall.EROFS) {
			t.Fatalf("%s on a read-only meta dir: %v (kind %v)", what, err, mqerr.KindOf(err))
		}
	}
	_, err = s.CreateTopic(ctx, model.Topic{Name: "orders"})
	unavailable("create topic", err)
	_, err = s.Topic(ctx, "auto")
	unavailable("auto-create topic", err)
	_, err = s.Group(ctx, "auto-group")
	unavailable("auto-create group", err)
	_, err = s.CreateGroup(ctx, model.Group{Name: "billing"})
	unavailable("create group", err)
	_, _, err = s.PutTopic(ctx, model.Topic{Name: "classic"})
	unavailable("classic put topic", err)
	_, err = s.EnsureGroup(ctx, "classic-group")
	unavailable("classic ensure group", err)
	_, err = s.GetTopic(ctx, DLQTopic("existing"))
	unavailable("dead-letter topic", err)

	for _, name := range []string{"orders", "auto", "classic"} {
		if _, err := s.GetTopic(ctx, name); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
			t.Fatalf("topic %s after a failed create: %v", name, err)
		}
	}
	for _, name := range []string{"billing", "auto-group", "classic-group"} {
		if _, err := s.GetGroup(ctx, name); mqerr.KindOf(err) != mqerr.KindGroupNotFound {
			t.Fatalf("group %s after a failed create: %v", name, err)
		}
	}
	if err := s.DeleteGroup(ctx, "existing"); mqerr.KindOf(err) != mqerr.KindStoreUnavailable {
		t.Fatalf("delete group on a read-only meta dir: %v", err)
	}
	if _, err := s.GetGroup(ctx, "existing"); err != nil {
		t.Fatalf("group after a failed delete: %v", err)
	}

	efs.SetInject(nil)
	if _, err := s.Topic(ctx, "auto"); err != nil {
		t.Fatalf("auto-create once writes work again: %v", err)
	}
	r, err := metastore.Open(mem.CrashClone(nil), "/meta", metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ts := r.Topics(); len(ts) != 1 || ts[0].Name != "auto" {
		t.Fatalf("topics after a restart: %+v", ts)
	}
}

// dropFunc is a QueueDropper.
type dropFunc func(ctx context.Context, topic string) error

func (f dropFunc) DeleteTopic(ctx context.Context, topic string) error { return f(ctx, topic) }

// TestDeletedTopicNotFoundWhileItsQueuesDrop: a topic's queues are
// dropped before it is removed, and meanwhile it is not found (a send
// must not land in queues already dropped), not even to auto-create;
// when the drop fails the topic stays, and is found again.
func TestDeletedTopicNotFoundWhileItsQueuesDrop(t *testing.T) {
	ctx := context.Background()
	st, err := metastore.Open(vfs.NewMem(), "/meta", metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var s *Service
	fail := false
	s = New(Config{AutoCreate: true}, st, dropFunc(func(ctx context.Context, topic string) error {
		if _, ok := st.Topic(topic); !ok {
			t.Errorf("topic %s removed before its queues were dropped", topic)
		}
		if _, err := s.GetTopic(ctx, topic); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
			t.Errorf("topic %s found while its queues drop: %v", topic, err)
		}
		if fail {
			return syscall.EIO
		}
		return nil
	}))
	if _, err := s.CreateTopic(ctx, model.Topic{Name: "t", Type: model.TopicNormal, Queues: 2}); err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := s.DeleteTopic(ctx, "t"); err == nil {
		t.Fatal("a deletion whose drop failed answered OK")
	}
	if _, err := s.GetTopic(ctx, "t"); err != nil {
		t.Fatalf("after a failed deletion: %v", err)
	}
	fail = false
	if err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTopic(ctx, "t"); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("after the deletion: %v", err)
	}
}
