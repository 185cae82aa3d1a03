package delay

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

// The delay levels of classic producers: upstream's 18, clamped.
func TestLevelDelay(t *testing.T) {
	for _, c := range []struct {
		level int
		want  time.Duration
	}{
		{-3, time.Second}, {0, time.Second}, {1, time.Second}, {2, 5 * time.Second}, {3, 10 * time.Second},
		{4, 30 * time.Second}, {5, time.Minute}, {14, 10 * time.Minute}, {15, 20 * time.Minute},
		{16, 30 * time.Minute}, {17, time.Hour}, {18, 2 * time.Hour}, {19, 2 * time.Hour}, {100, 2 * time.Hour},
	} {
		if got := LevelDelay(c.level); got != c.want {
			t.Errorf("LevelDelay(%d) = %v, want %v", c.level, got, c.want)
		}
	}
}

// Recall: which topics allow it, which handles it takes, and what a
// second recall of the same message answers.
func TestRecallRules(t *testing.T) {
	delayed := model.Topic{Name: "reminders", Type: model.TopicDelay, Queues: 2}
	mixed := model.Topic{Name: "mixed", Type: model.TopicMixed, Queues: 2}
	normal := model.Topic{Name: "orders", Type: model.TopicNormal, Queues: 2}
	for _, c := range []struct {
		name    string
		topic   model.Topic // recalled on
		handle  string      // "": the send's
		twice   bool        // recall it again
		kind    mqerr.Kind
		ok      bool
		pending int
	}{
		{"a pending delayed message", delayed, "", false, 0, true, 0},
		{"on a MIXED topic", mixed, "", false, 0, true, 0},
		{"on a topic that takes no delayed messages", normal, "", false, mqerr.KindMessageTypeConflict, false, 1},
		{"a garbled handle", delayed, "d1.garbage", false, mqerr.KindBadRequest, false, 1},
		{"a second recall of the same message", delayed, "", true, mqerr.KindMessageNotFound, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			s, err := Open(ctx, Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st, st.Meta(),
				topics{delayed.Name: delayed, mixed.Name: mixed, normal.Name: normal})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = s.Close(ctx)
				_ = st.Close(ctx)
			}()
			sendOn := delayed
			if c.topic.Type != model.TopicNormal {
				sendOn = c.topic
			}
			m := &model.Message{Topic: sendOn.Name, ID: "d-1", Body: []byte("b"), DeliveryTime: clk.Now().Add(time.Hour)}
			r, err := s.Stage(ctx, sendOn, m, model.Producer{})
			if err != nil || r.RecallHandle == "" {
				t.Fatalf("Stage: %+v, %v", r, err)
			}
			handle := r.RecallHandle
			if c.handle != "" {
				handle = c.handle
			}
			id, err := s.Recall(ctx, c.topic, handle)
			if c.twice {
				if err != nil || id != "d-1" {
					t.Fatalf("first recall: %q, %v", id, err)
				}
				id, err = s.Recall(ctx, c.topic, handle)
			}
			if c.ok != (err == nil) || (err != nil && mqerr.KindOf(err) != c.kind) {
				t.Fatalf("recall: %q, err %v; want ok %v kind %v", id, err, c.ok, c.kind)
			}
			if c.ok && id != "d-1" {
				t.Fatalf("recall returned %q, want the message id", id)
			}
			if s.Pending() != c.pending {
				t.Fatalf("%d pending, want %d", s.Pending(), c.pending)
			}
		})
	}
}
