package produce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

type fakeAppender struct {
	err    error
	status storage.Status
	got    []*message.Message
}

func (a *fakeAppender) Append(_ context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	if a.err != nil {
		return storage.AppendResult{}, a.err
	}
	a.got = append(a.got, msgs...)
	res := storage.AppendResult{Status: a.status}
	for i := range msgs {
		res.Entries = append(res.Entries, storage.AppendEntry{QueueOffset: int64(len(a.got) - len(msgs) + i)})
	}
	return res, nil
}

type fakeTopics map[string]model.Topic

func (f fakeTopics) Topic(_ context.Context, name string) (model.Topic, error) {
	if t, ok := f[name]; ok {
		return t, nil
	}
	return model.Topic{}, mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist", name)
}

type fakeSpecial struct{ staged []string }

func (f *fakeSpecial) Stage(_ context.Context, _ model.Topic, m *model.Message, _ model.Producer) (model.SendResult, error) {
	f.staged = append(f.staged, m.ID)
	return model.SendResult{MessageID: m.ID}, nil
}

type fakeSpace struct{ err error }

func (f fakeSpace) CheckSpace() error { return f.err }

// The rules of Send, in the order it applies them: what is refused as a
// whole and with which kind, and where each accepted message goes.
func TestSendRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	topics := fakeTopics{
		"orders":   {Name: "orders", Type: model.TopicNormal, Queues: 4},
		"fifo":     {Name: "fifo", Type: model.TopicFIFO, Queues: 4},
		"delayed":  {Name: "delayed", Type: model.TopicDelay, Queues: 4},
		"tx":       {Name: "tx", Type: model.TopicTransaction, Queues: 4},
		"readonly": {Name: "readonly", Type: model.TopicNormal, Queues: 4, Perm: model.PermRead},
	}
	msg := func(topic, id string) *model.Message {
		return &model.Message{Topic: topic, ID: id, Body: []byte("x")}
	}
	type want struct {
		kind     mqerr.Kind // refused as a whole with it; 0 (KindInternal, never expected): accepted
		appended int        // messages appended straight to their topic
		delayed  int        // handed to the delay service
		txn      int        // handed to the transaction service
	}
	for _, c := range []struct {
		name   string
		topic  string
		msgs   []*model.Message
		noSpec bool  // no delay or transaction service
		space  error // the store's answer on space
		want   want
	}{
		{"an empty batch", "orders", nil, false, nil, want{kind: mqerr.KindMessageCorrupted}},
		{"a batch for two topics", "orders", []*model.Message{msg("orders", "a"), msg("fifo", "b")}, false, nil, want{kind: mqerr.KindMessageCorrupted}},
		{"an invalid message before an unknown topic", "nosuch", []*model.Message{{Topic: "nosuch", ID: "a"}}, false, nil, want{kind: mqerr.KindBodyEmpty}},
		{"an unknown topic", "nosuch", []*model.Message{msg("nosuch", "a")}, false, nil, want{kind: mqerr.KindTopicNotFound}},
		{"a topic that is not writable", "readonly", []*model.Message{msg("readonly", "a")}, false, nil, want{kind: mqerr.KindForbidden}},
		{"a message of another type than its topic's", "fifo", []*model.Message{msg("fifo", "a")}, false, nil, want{kind: mqerr.KindMessageTypeConflict}},
		{"a disk below its reserve", "orders", []*model.Message{msg("orders", "a")}, false, errors.New("12 MiB free"), want{kind: mqerr.KindDiskFull}},
		{"a normal batch", "orders", []*model.Message{msg("orders", "a"), msg("orders", "b")}, false, nil, want{appended: 2}},
		{"a delayed message", "delayed", []*model.Message{{Topic: "delayed", ID: "a", Body: []byte("x"), DeliveryTime: now.Add(time.Minute)}}, false, nil, want{delayed: 1}},
		{"a delivery time already past goes straight to its queue", "delayed", []*model.Message{{Topic: "delayed", ID: "a", Body: []byte("x"), DeliveryTime: now.Add(-time.Minute)}}, false, nil, want{appended: 1}},
		{"a transactional message", "tx", []*model.Message{{Topic: "tx", ID: "a", Body: []byte("x"), Transactional: true}}, false, nil, want{txn: 1}},
		{"a delayed message without a delay service", "delayed", []*model.Message{{Topic: "delayed", ID: "a", Body: []byte("x"), DeliveryTime: now.Add(time.Minute)}}, true, nil, want{kind: mqerr.KindUnsupported}},
		{"a transactional message without a transaction service", "tx", []*model.Message{{Topic: "tx", ID: "a", Body: []byte("x"), Transactional: true}}, true, nil, want{kind: mqerr.KindUnsupported}},
		{"a LITE topic without a lite index", "orders", []*model.Message{{Topic: "orders", ID: "a", Body: []byte("x"), LiteTopic: "l"}}, false, nil, want{kind: mqerr.KindMessageTypeConflict}},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := &fakeAppender{}
			delay, txn := &fakeSpecial{}, &fakeSpecial{}
			cfg := Config{Clock: clock.NewFake(now), Delay: delay, Txn: txn}
			if c.noSpec {
				cfg.Delay, cfg.Txn = nil, nil
			}
			if c.space != nil {
				cfg.Space = fakeSpace{c.space}
			}
			s := New(cfg, app, topics)
			res, err := s.Send(context.Background(), c.topic, c.msgs, model.Producer{Host: "10.0.0.1"})
			if c.want.kind != 0 {
				if err == nil || mqerr.KindOf(err) != c.want.kind {
					t.Fatalf("err %v (kind %v), want kind %v", err, mqerr.KindOf(err), c.want.kind)
				}
				if len(app.got)+len(delay.staged)+len(txn.staged) != 0 {
					t.Fatalf("a refused send stored something: %d appended, %v delayed, %v staged", len(app.got), delay.staged, txn.staged)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(app.got) != c.want.appended || len(delay.staged) != c.want.delayed || len(txn.staged) != c.want.txn {
				t.Fatalf("appended %d, delayed %d, staged %d; want %+v", len(app.got), len(delay.staged), len(txn.staged), c.want)
			}
			if len(res) != len(c.msgs) {
				t.Fatalf("%d results for %d messages", len(res), len(c.msgs))
			}
			for i, m := range c.msgs {
				if res[i].MessageID != m.ID || res[i].Err != nil {
					t.Fatalf("result %d: %+v", i, res[i])
				}
				if m.BornTime.IsZero() || m.BornHost != "10.0.0.1" {
					t.Fatalf("message %d: born %v at %q, want the send's time and the producer's host", i, m.BornTime, m.BornHost)
				}
			}
		})
	}
}

// A sync-mode store that answers before its flush finished: stored, each
// result says not yet durable.
func TestSendFlushTimeoutIsPerMessage(t *testing.T) {
	app := &fakeAppender{status: storage.StatusFlushTimeout}
	s := New(Config{}, app, fakeTopics{"orders": {Name: "orders", Type: model.TopicNormal, Queues: 1}})
	res, err := s.Send(context.Background(), "orders", []*model.Message{{Topic: "orders", ID: "a", Body: []byte("x")}}, model.Producer{})
	if err != nil || len(res) != 1 || mqerr.KindOf(res[0].Err) != mqerr.KindFlushTimeout || len(app.got) != 1 {
		t.Fatalf("res %+v, err %v", res, err)
	}
}

// Where a message lands: a FIFO message group always in the same queue,
// other messages round robin per topic, a one-queue topic in queue 0.
func TestPickQueue(t *testing.T) {
	var rr sync.Map
	four := model.Topic{Name: "t4", Queues: 4}
	pick := func(t model.Topic, g string) int32 {
		q, ok := PickQueue(t, g, &rr, placement.Of{})
		if !ok {
			panic("one group holds every queue")
		}
		return q
	}
	first := pick(four, "g-7")
	for range 10 {
		if q := pick(four, "g-7"); q != first {
			t.Fatalf("message group g-7 moved from queue %d to %d", first, q)
		}
	}
	seen := map[int32]int{}
	for range 8 {
		seen[pick(four, "")]++
	}
	for q := range int32(4) {
		if seen[q] != 2 {
			t.Fatalf("round robin over 4 queues, 8 sends: %v", seen)
		}
	}
	for _, g := range []string{"", "g"} {
		if q := pick(model.Topic{Name: "t1", Queues: 1}, g); q != 0 {
			t.Fatalf("one-queue topic, group %q: queue %d", g, q)
		}
	}
}

// A data group of several picks only queues it holds: round robin over
// them, a message group's own queue when it holds it; a send naming a
// message group whose queue another group holds is refused as
// retryable, and so is a send to a topic none of whose queues it holds.
func TestPickQueuePlacement(t *testing.T) {
	eight := model.Topic{Name: "orders", Type: model.TopicFIFO, Queues: 8}
	for g := range 3 {
		p := placement.Of{Group: g, Groups: 3}
		var rr sync.Map
		seen := map[int32]int{}
		n := int(p.Count(eight.Name, false, eight.Queues))
		for range 3 * n {
			q, ok := PickQueue(eight, "", &rr, p)
			if !ok || !p.Holds(eight.Name, false, q) {
				t.Fatalf("group %d picked queue %d (ok %v), which it does not hold", g, q, ok)
			}
			seen[q]++
		}
		if len(seen) != n {
			t.Fatalf("group %d: round robin reached %d of its %d queues", g, len(seen), n)
		}
		for i := range 50 {
			mg := fmt.Sprintf("mg-%d", i)
			q, ok := PickQueue(eight, mg, &rr, p)
			if !ok || !p.Holds(eight.Name, false, q) {
				t.Fatalf("group %d, message group %s: queue %d", g, mg, q)
			}
			if hq := HashQueue(eight, mg); p.Holds(eight.Name, false, hq) && q != hq {
				t.Fatalf("group %d holds %s's queue %d but picked %d", g, mg, hq, q)
			}
		}
	}
	// A send through produce: a message group of another group's queue is
	// refused, nothing stored.
	var other string
	p := placement.Of{Group: 0, Groups: 3}
	for i := 0; other == ""; i++ {
		if mg := fmt.Sprintf("mg-%d", i); !p.Holds(eight.Name, false, HashQueue(eight, mg)) {
			other = mg
		}
	}
	app := &fakeAppender{}
	s := New(Config{Placement: p}, app, fakeTopics{"orders": eight})
	_, err := s.Send(context.Background(), "orders", []*model.Message{{Topic: "orders", ID: "a", MessageGroup: other, Type: model.MessageFIFO, Body: []byte("x")}}, model.Producer{})
	if mqerr.KindOf(err) != mqerr.KindReplicationLost || len(app.got) != 0 {
		t.Fatalf("message group %s of another group's queue: %v, %d stored", other, err, len(app.got))
	}
	one := model.Topic{Name: "single", Type: model.TopicNormal, Queues: 1}
	var none placement.Of
	for g := range 3 {
		if pl := (placement.Of{Group: g, Groups: 3}); !pl.Holds(one.Name, false, 0) {
			none = pl
		}
	}
	s = New(Config{Placement: none}, app, fakeTopics{"single": one})
	_, err = s.Send(context.Background(), "single", []*model.Message{{Topic: "single", ID: "b", Body: []byte("x")}}, model.Producer{})
	if mqerr.KindOf(err) != mqerr.KindReplicationLost || len(app.got) != 0 {
		t.Fatalf("a topic whose one queue is in another group: %v, %d stored", err, len(app.got))
	}
}

// How a store append failure is classified for the client.
func TestAppendErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err  error
		want mqerr.Kind
	}{
		{mqerr.Errorf(mqerr.KindNoQuorum, "no majority"), mqerr.KindNoQuorum},
		{storage.ErrClosed, mqerr.KindUnavailable},
		{fmt.Errorf("append: %w", storage.ErrTooLarge), mqerr.KindBodyTooLarge},
		{storage.ErrDiskFull, mqerr.KindDiskFull},
		{fmt.Errorf("%w: %w", storage.ErrNotWritable, syscall.ENOSPC), mqerr.KindDiskFull},
		{fmt.Errorf("%w: %w", storage.ErrNotWritable, syscall.EIO), mqerr.KindStoreUnavailable},
		{context.DeadlineExceeded, mqerr.KindRequestTimeout},
		{context.Canceled, mqerr.KindRequestTimeout},
		{errors.New("something else"), mqerr.KindStoreUnavailable},
	} {
		if got := mqerr.KindOf(AppendError(c.err)); got != c.want {
			t.Errorf("AppendError(%v): %v, want %v", c.err, got, c.want)
		}
	}
}
