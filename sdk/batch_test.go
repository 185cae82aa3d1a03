package sdk

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// results collects SendAsync outcomes by message id.
type results struct {
	mu   sync.Mutex
	got  map[string]error
	rcpt map[string]SendReceipt
	all  sync.WaitGroup
}

func newResults() *results {
	return &results{got: map[string]error{}, rcpt: map[string]SendReceipt{}}
}

// send gives m (with id) to p.SendAsync and records its outcome.
func (r *results) send(t *testing.T, p *Producer, id string, m *Message) {
	t.Helper()
	m.ID = id
	r.all.Add(1)
	p.SendAsync(context.Background(), m, func(rc SendReceipt, err error) {
		r.mu.Lock()
		if _, dup := r.got[id]; dup {
			t.Errorf("message %s: done called twice", id)
		}
		r.got[id], r.rcpt[id] = err, rc
		r.mu.Unlock()
		r.all.Done()
	})
}

func (r *results) wait(t *testing.T) {
	t.Helper()
	if err := waitGroup(testCtx(t, 10*time.Second), &r.all); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func batchSizes(f *fakeServer) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, a := range f.attempts {
		out = append(out, len(a.ids))
	}
	return out
}

// Messages given to a lingering producer go in batches of BatchMessages,
// the rest when the linger ends, each with its own receipt.
func TestLingerBatchesWithPerMessageReceipts(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: 50 * time.Millisecond, BatchMessages: 4})
	r := newResults()
	for i := range 10 {
		r.send(t, p, fmt.Sprintf("ID%02d", i), &Message{Topic: "t", Body: []byte("x")})
	}
	r.wait(t)
	if got := batchSizes(f); !slices.Equal(got, []int{4, 4, 2}) && !slices.Equal(got, []int{4, 2, 4}) {
		// The two full batches may reach the server in either order.
		t.Fatalf("batch sizes %v, want two of 4 and one of 2", got)
	}
	for i := range 10 {
		id := fmt.Sprintf("ID%02d", i)
		if r.got[id] != nil || r.rcpt[id].MessageID != id {
			t.Fatalf("message %s: receipt %+v, err %v", id, r.rcpt[id], r.got[id])
		}
	}
}

// A batch reaching BatchBytes is sent at once; a message that would take
// a batch past it starts the next one.
func TestBatchBytesBound(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchBytes: 10})
	r := newResults()
	r.send(t, p, "A", &Message{Topic: "t", Body: []byte("aaaa")})
	r.send(t, p, "B", &Message{Topic: "t", Body: []byte("bbbb")})
	r.send(t, p, "C", &Message{Topic: "t", Body: []byte("cccc")}) // 12 > 10: A and B go
	r.send(t, p, "D", &Message{Topic: "t", Body: []byte("dddddd")})
	r.wait(t) // C and D make exactly 10: sent without waiting for the linger
	if got := batchSizes(f); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("batch sizes %v, want [2 2]", got)
	}
}

// A batch the server refuses as a whole (one status, no entries, nothing
// stored) is sent again message by message: the bad message fails alone
// with its own code, the others are stored.
func TestBatchRefusedAsAWholeGivesPerMessageErrors(t *testing.T) {
	f := &fakeServer{send: func(_ context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		for _, m := range req.GetMessages() {
			if string(m.GetBody()) == "bad" {
				return statusOnly(v2.Code_ILLEGAL_MESSAGE_TAG), nil
			}
		}
		return okSend(req), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 3})
	r := newResults()
	r.send(t, p, "A", &Message{Topic: "t", Body: []byte("a")})
	r.send(t, p, "B", &Message{Topic: "t", Body: []byte("bad")})
	r.send(t, p, "C", &Message{Topic: "t", Body: []byte("c")})
	r.wait(t)
	if got := batchSizes(f); !slices.Equal(got, []int{3, 1, 1, 1}) {
		t.Fatalf("attempts %v, want the batch of 3 then each alone", got)
	}
	if r.got["A"] != nil || r.got["C"] != nil || r.rcpt["A"].MessageID != "A" || r.rcpt["C"].MessageID != "C" {
		t.Fatalf("A: %v, C: %v; want both stored", r.got["A"], r.got["C"])
	}
	var se *SendError
	if err := r.got["B"]; !errors.Is(err, ErrNotStored) || CodeOf(err) != Code(v2.Code_ILLEGAL_MESSAGE_TAG) ||
		!errors.As(err, &se) || !slices.Equal(se.MessageIDs, []string{"B"}) {
		t.Fatalf("B: %v; want ErrNotStored with ILLEGAL_MESSAGE_TAG, naming B alone", err)
	}
}

// Entries that differ give each message its own outcome.
func TestBatchMixedEntries(t *testing.T) {
	f := &fakeServer{send: func(_ context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		resp := okSend(req)
		resp.Status = &v2.Status{Code: v2.Code_MULTIPLE_RESULTS}
		resp.Entries[1].Status = &v2.Status{Code: v2.Code_MASTER_PERSISTENCE_TIMEOUT}
		resp.Entries[2].Status = &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR}
		resp.Entries[3].Status = &v2.Status{Code: v2.Code_SLAVE_PERSISTENCE_TIMEOUT}
		resp.Entries[4].Status = &v2.Status{Code: v2.Code_ILLEGAL_MESSAGE_TAG}
		return resp, nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 5})
	r := newResults()
	for _, id := range []string{"A", "B", "C", "D", "E"} {
		r.send(t, p, id, &Message{Topic: "t", Body: []byte("x")})
	}
	r.wait(t)
	if r.got["A"] != nil {
		t.Fatalf("A: %v", r.got["A"])
	}
	if !errors.Is(r.got["B"], ErrNotDurable) || r.rcpt["B"].MessageID != "B" {
		t.Fatalf("B: %v %+v; want ErrNotDurable with its receipt", r.got["B"], r.rcpt["B"])
	}
	if !errors.Is(r.got["C"], ErrOutcomeUnknown) {
		t.Fatalf("C: %v; want ErrOutcomeUnknown", r.got["C"])
	}
	// A replica group that did not commit D in time may still commit it.
	if !errors.Is(r.got["D"], ErrOutcomeUnknown) || r.rcpt["D"].MessageID != "" {
		t.Fatalf("D: %v %+v; want ErrOutcomeUnknown and no receipt", r.got["D"], r.rcpt["D"])
	}
	if !errors.Is(r.got["E"], ErrNotStored) {
		t.Fatalf("E: %v; want ErrNotStored", r.got["E"])
	}
}

// A batch a replica group did not commit in time (HA_NOT_AVAILABLE,
// SLAVE_PERSISTENCE_TIMEOUT) is tried again whole, with the same ids; when
// no attempt is answered OK, each message's outcome is unknown: the batch
// is not sent again message by message, and no message gets a receipt.
func TestBatchOfUnknownOutcome(t *testing.T) {
	for _, code := range []v2.Code{v2.Code_HA_NOT_AVAILABLE, v2.Code_SLAVE_PERSISTENCE_TIMEOUT} {
		t.Run(code.String(), func(t *testing.T) {
			f := &fakeServer{send: func(context.Context, int, *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
				return statusOnly(code), nil
			}}
			_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 3, MaxAttempts: 3})
			r := newResults()
			for _, id := range []string{"A", "B", "C"} {
				r.send(t, p, id, &Message{Topic: "t", Body: []byte("x")})
			}
			r.wait(t)
			if got := batchSizes(f); !slices.Equal(got, []int{3, 3, 3}) {
				t.Fatalf("attempts %v, want the batch of 3 three times and nothing alone", got)
			}
			f.mu.Lock()
			for _, a := range f.attempts {
				if !slices.Equal(a.ids, []string{"A", "B", "C"}) {
					t.Errorf("attempt with ids %v, want the same ids each time", a.ids)
				}
			}
			f.mu.Unlock()
			for _, id := range []string{"A", "B", "C"} {
				var se *SendError
				if err := r.got[id]; !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &se) ||
					!slices.Equal(se.MessageIDs, []string{id}) || se.Attempts != 3 || r.rcpt[id].MessageID != "" {
					t.Fatalf("%s: %v, receipt %+v; want ErrOutcomeUnknown after 3 attempts, naming %s alone", id, err, r.rcpt[id], id)
				}
			}
		})
	}
}

// A batch answered HA_NOT_AVAILABLE, then OK on the next attempt, is
// stored: each message gets its receipt.
func TestBatchStoredAfterReplicationRetry(t *testing.T) {
	f := &fakeServer{send: func(_ context.Context, n int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		if n == 1 {
			return statusOnly(v2.Code_HA_NOT_AVAILABLE), nil
		}
		return okSend(req), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 2})
	r := newResults()
	r.send(t, p, "A", &Message{Topic: "t", Body: []byte("x")})
	r.send(t, p, "B", &Message{Topic: "t", Body: []byte("x")})
	r.wait(t)
	if got := batchSizes(f); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("attempts %v, want the batch twice", got)
	}
	for _, id := range []string{"A", "B"} {
		if r.got[id] != nil || r.rcpt[id].MessageID != id {
			t.Fatalf("%s: %v %+v", id, r.got[id], r.rcpt[id])
		}
	}
}

// The batches of one message group are sent one after the other: while
// one is in flight the next waits, so the server sees the group's
// messages in the order given. Plain messages are not held behind it.
func TestMessageGroupBatchesStayInOrder(t *testing.T) {
	release := make(chan struct{})
	f := &fakeServer{send: func(ctx context.Context, n int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		if req.GetMessages()[0].GetSystemProperties().GetMessageGroup() == "g" && n == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return okSend(req), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 2})
	r := newResults()
	var want []string
	for i := range 6 {
		id := fmt.Sprintf("G%d", i)
		want = append(want, id)
		r.send(t, p, id, &Message{Topic: "t", Body: []byte("x"), MessageGroup: "g"})
		if i == 1 {
			f.wait(t, "the group's first batch", func() bool { return len(f.attempts) == 1 })
		}
	}
	// The first batch is held by the server; the two others wait in the
	// producer (each closed when it filled, inside SendAsync).
	p.batch.mu.Lock()
	queued := len(p.batch.lanes[laneKey{topic: "t", group: "g"}].queue)
	p.batch.mu.Unlock()
	if queued != 2 {
		t.Fatalf("%d batches of the group waiting, want 2", queued)
	}
	// A plain message is not held behind the group.
	r.send(t, p, "P0", &Message{Topic: "t", Body: []byte("x")})
	r.send(t, p, "P1", &Message{Topic: "t", Body: []byte("x")})
	f.wait(t, "the plain batch", func() bool { return len(f.attempts) == 2 })
	close(release)
	r.wait(t)
	f.mu.Lock()
	var order []string
	for _, a := range f.attempts {
		if a.ids[0][0] == 'G' {
			order = append(order, a.ids...)
		}
	}
	f.mu.Unlock()
	if !slices.Equal(order, want) {
		t.Fatalf("the group reached the server as %v, want %v", order, want)
	}
}

// Send on a lingering producer waits for its batch; when its context ends
// before the batch left, the message is withdrawn and never sent.
func TestLingeringSendWithdrawnWhenItsContextEnds(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrNotStored) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrNotStored and Canceled", err)
	}
	if err := p.Flush(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := batchSizes(f); len(got) != 0 {
		t.Fatalf("attempts %v, want none", got)
	}
}

// Send on a lingering producer waits for its batch and returns its own
// receipt.
func TestLingeringSendWaitsForItsBatch(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: 10 * time.Millisecond})
	rc, err := p.Send(testCtx(t, 5*time.Second), &Message{Topic: "t", Body: []byte("y"), ID: "Y"})
	if err != nil || rc.MessageID != "Y" {
		t.Fatalf("Send: %+v, %v", rc, err)
	}
}

// Close sends what is gathered before ending the session, and leaves no
// goroutine behind.
func TestCloseSendsGatheredBatches(t *testing.T) {
	f := &fakeServer{}
	addr := startFake(t, f)
	base := runtime.NumGoroutine()
	c := dialFake(t, addr)
	p, err := c.NewProducer(testCtx(t, 5*time.Second), ProducerConfig{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := newResults()
	for _, id := range []string{"A", "B", "C"} {
		r.send(t, p, id, &Message{Topic: "t", Body: []byte("x")})
	}
	r.send(t, p, "D", &Message{Topic: "u", Body: []byte("x")})
	if err := c.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	for id, err := range r.got {
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if got := batchSizes(f); len(got) != 2 || got[0]+got[1] != 4 {
		t.Fatalf("batches %v, want 3 and 1", got)
	}
	r2 := newResults()
	r2.send(t, p, "E", &Message{Topic: "t", Body: []byte("x")})
	r2.wait(t)
	if !errors.Is(r2.got["E"], ErrClosed) || !errors.Is(r2.got["E"], ErrNotStored) {
		t.Fatalf("after Close: %v", r2.got["E"])
	}
	f.mu.Lock()
	term := len(f.terminated)
	f.mu.Unlock()
	if term != 1 {
		t.Fatalf("%d terminations", term)
	}
	waitGoroutines(t, base)
}

// SendAsync waits for room once MaxBuffered messages are held, and gives
// up (nothing sent) when its context ends first.
func TestMaxBufferedWaitsForRoom(t *testing.T) {
	release := make(chan struct{})
	f := &fakeServer{send: func(ctx context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return okSend(req), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 2, MaxBuffered: 2})
	r := newResults()
	r.send(t, p, "A", &Message{Topic: "t", Body: []byte("x")})
	r.send(t, p, "B", &Message{Topic: "t", Body: []byte("x")}) // full: sent, held by the server
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var lateErr error
	p.SendAsync(ctx, &Message{Topic: "t", Body: []byte("x"), ID: "C"}, func(_ SendReceipt, err error) { lateErr = err })
	if !errors.Is(lateErr, ErrNotStored) || !errors.Is(lateErr, context.Canceled) {
		t.Fatalf("C: %v, want ErrNotStored (no room)", lateErr)
	}
	close(release)
	r.wait(t)
	r.send(t, p, "D", &Message{Topic: "t", Body: []byte("x")}) // room again
	if err := p.Flush(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	if r.got["D"] != nil {
		t.Fatalf("D: %v", r.got["D"])
	}
}

// upperHex writes what strings.ToUpper(hex.EncodeToString(b)) does.
func TestUpperHex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var b [17]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := upperHex(b), strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("upperHex(%x) = %s, want %s", b, got, want)
		}
	}
}

// Properties and keys weigh against BatchBytes as bodies do.
func TestBatchBytesCountsProperties(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchBytes: 10})
	r := newResults()
	r.send(t, p, "A", &Message{Topic: "t", Body: []byte("a"), Properties: map[string]string{"kkkk": "vvvv"}}) // 9
	r.send(t, p, "B", &Message{Topic: "t", Body: []byte("b"), Keys: []string{"xx"}})                          // 12 > 10: A goes
	if err := p.Flush(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	if got := batchSizes(f); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("batch sizes %v, want [1 1]", got)
	}
}
