package lite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// memStore is a store that keeps nothing: appends get positions, reads
// get a small message. It isolates the lite index's own memory.
type memStore struct {
	mu   sync.Mutex
	next map[string]int64
	pos  int64
}

func (m *memStore) Append(_ context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res storage.AppendResult
	for _, r := range msgs {
		k := fmt.Sprint(r.Topic, "/", r.QueueID)
		res.Entries = append(res.Entries, storage.AppendEntry{PhysOffset: m.pos, Size: 100, QueueOffset: m.next[k], StoreTime: time.Now().UnixMilli()})
		m.next[k]++
		m.pos += 100
	}
	return res, nil
}

func (m *memStore) ReadQueue(string, int32, int64, int) ([]storage.QueueEntry, error) {
	return nil, nil
}
func (m *memStore) ReadMessage(phys int64, size int32) (*message.Message, error) {
	return &message.Message{Body: []byte("x"), PhysOffset: phys, Size: size}, nil
}
func (m *memStore) QueueRange(string, int32) (int64, int64) { return 0, 0 }

type noTopics struct{}

func (noTopics) ListTopics(context.Context) ([]model.Topic, error) { return nil, nil }

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkLiteTopicMemory measures what lite topics cost in memory, with
// b.N lite topics under one parent (run it with -benchtime=1000000x for
// a million):
//
//   - idle-B/lite: a lite topic with one message kept and no consumer;
//   - active-B/lite: the same with a group consuming it, a run in
//     flight, and a place in a client's subscription (1000 lite topics
//     per client);
//   - consumed-B/lite: after the group acknowledged everything (its
//     messages dropped, its position kept).
//
// Names are 16 bytes ("conversation-%04x"-like). A lite topic name that
// was never used costs nothing.
func BenchmarkLiteTopicMemory(b *testing.B) {
	ctx := context.Background()
	st := &memStore{next: map[string]int64{}}
	s, err := Open(ctx, Config{Clock: clock.Real{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Key: []byte("0123456789abcdef"), TopicQuota: 1 << 30, SubscriptionQuota: 1000}, st, noTopics{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	parent := model.Topic{Name: "chat", Type: model.TopicLite, Queues: 8}
	group := model.Group{Name: "g"}
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("conversation%04x", i)
	}
	base := heap()
	b.ResetTimer()
	for _, n := range names {
		n = strings.Clone(n) // a name of its own, as a request brings it
		if err := s.Reserve(parent, n); err != nil {
			b.Fatal(err)
		}
		q := QueueOf(n, parent.Queues)
		res, _ := st.Append(ctx, &message.Message{Topic: parent.Name, QueueID: q})
		s.Appended(parent, q, []string{n}, res.Entries)
	}
	b.StopTimer()
	idle := heap()
	b.ReportMetric(float64(idle-base)/float64(b.N), "idle-B/lite")

	var handles []string
	for c := 0; c*1000 < len(names); c++ {
		client := fmt.Sprint("client-", c)
		set := names[c*1000 : min((c+1)*1000, len(names))]
		if err := s.Sync(SyncRequest{ClientID: client, Group: group.Name, Topic: parent, Action: CompleteAdd, Lites: set}); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(set); {
			ds, err := s.Receive(ctx, ReceiveRequest{Group: group, Topic: parent, ClientID: client, Max: 32, Invisible: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			got += len(ds)
			for _, d := range ds {
				handles = append(handles, d.ReceiptHandle)
			}
		}
	}
	held := uint64(len(handles)) * 16 // the handles slice itself
	active := heap() - held
	b.ReportMetric(float64(active-base)/float64(b.N), "active-B/lite")
	for i := 0; i < len(handles); i += 1000 {
		for _, err := range s.Ack(ctx, group.Name, parent, handles[i:min(i+1000, len(handles))]) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	handles = nil
	consumed := heap()
	b.ReportMetric(float64(consumed-base)/float64(b.N), "consumed-B/lite")
	runtime.KeepAlive(names)
}
