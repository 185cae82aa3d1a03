package txn

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

type topics map[string]model.Topic

func (f topics) GetTopic(_ context.Context, name string) (model.Topic, error) {
	if t, ok := f[name]; ok {
		return t, nil
	}
	return model.Topic{}, mqerr.Errorf(mqerr.KindTopicNotFound, "no topic %q", name)
}

func openService(t *testing.T) (*Service, *storage.Store) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st, st.Meta(),
		topics{"orders": {Name: "orders", Type: model.TopicTransaction, Queues: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
		_ = st.Close(ctx)
	})
	return s, st
}

// The resolutions a producer may send after a transactional send, in
// order, and what each answers: a repeat of the applied resolution is
// OK, the opposite one is refused, "unknown yet" changes nothing.
func TestEndRules(t *testing.T) {
	type step struct {
		res       Resolution
		messageID string // "" : not given; "other": another message's id
		token     string // "": the send's; otherwise this one
		topic     string // "": the send's
		kind      mqerr.Kind
		ok        bool
	}
	for _, c := range []struct {
		name      string
		steps     []step
		published int // messages in the topic at the end
		pending   int
	}{
		{"commit publishes", []step{{res: Commit, ok: true}}, 1, 0},
		{"rollback publishes nothing", []step{{res: Rollback, ok: true}}, 0, 0},
		{"unknown yet leaves it pending", []step{{res: Unspecified, ok: true}}, 0, 1},
		{"a repeated commit is OK", []step{{res: Commit, ok: true}, {res: Commit, ok: true}}, 1, 0},
		{"a repeated rollback is OK", []step{{res: Rollback, ok: true}, {res: Rollback, ok: true}}, 0, 0},
		{"rollback after commit is refused", []step{{res: Commit, ok: true}, {res: Rollback, kind: mqerr.KindInvalidTransactionID}}, 1, 0},
		{"commit after rollback is refused", []step{{res: Rollback, ok: true}, {res: Commit, kind: mqerr.KindInvalidTransactionID}}, 0, 0},
		{"the message id must match", []step{{res: Commit, messageID: "other", kind: mqerr.KindInvalidTransactionID}}, 0, 1},
		{"the message's own id is accepted", []step{{res: Commit, messageID: "tx-1", ok: true}}, 1, 0},
		{"a garbled transaction id", []step{{res: Commit, token: "t1.garbage", kind: mqerr.KindInvalidTransactionID}}, 0, 1},
		{"a transaction id of another topic", []step{{res: Commit, topic: "payments", kind: mqerr.KindInvalidTransactionID}}, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, st := openService(t)
			ctx := context.Background()
			m := &model.Message{Topic: "orders", ID: "tx-1", Body: []byte("b"), Transactional: true}
			r, err := s.Stage(ctx, model.Topic{Name: "orders", Type: model.TopicTransaction, Queues: 2}, m, model.Producer{ClientID: "p1"})
			if err != nil || r.TransactionID == "" || r.MessageID != "tx-1" {
				t.Fatalf("Stage: %+v, %v", r, err)
			}
			if s.Pending() != 1 {
				t.Fatalf("%d pending after the send", s.Pending())
			}
			for i, sp := range c.steps {
				tok, topic, id := r.TransactionID, "orders", sp.messageID
				if sp.token != "" {
					tok = sp.token
				}
				if sp.topic != "" {
					topic = sp.topic
				}
				if id == "other" {
					id = "tx-2"
				}
				err := s.End(ctx, topic, id, tok, sp.res)
				if sp.ok != (err == nil) || (err != nil && mqerr.KindOf(err) != sp.kind) {
					t.Fatalf("step %d (%v): err %v, want ok %v kind %v", i, sp.res, err, sp.ok, sp.kind)
				}
			}
			_, written := st.LogRange()
			if err := st.WaitDispatched(ctx, written); err != nil {
				t.Fatal(err)
			}
			n := 0
			for q := int32(0); q < 2; q++ {
				lo, hi := st.QueueRange("orders", q)
				n += int(hi - lo)
			}
			if n != c.published || s.Pending() != c.pending {
				t.Fatalf("published %d, pending %d; want %d, %d", n, s.Pending(), c.published, c.pending)
			}
		})
	}
}
