package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/clock"
)

type recStream struct {
	mu   sync.Mutex
	sent []Command
	err  error
	busy bool
	t    *testing.T
}

func (s *recStream) Send(cmd Command) error {
	s.mu.Lock()
	if s.busy {
		s.t.Error("concurrent Send on one stream")
	}
	s.busy = true
	s.mu.Unlock()
	time.Sleep(time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	if s.err != nil {
		return s.err
	}
	s.sent = append(s.sent, cmd)
	return nil
}

type goneRec struct {
	mu  sync.Mutex
	ids []string
}

func (g *goneRec) add(id string) { g.mu.Lock(); g.ids = append(g.ids, id); g.mu.Unlock() }
func (g *goneRec) get() []string { g.mu.Lock(); defer g.mu.Unlock(); return slices.Clone(g.ids) }

func newReg(t *testing.T) (*Registry, *clock.Fake, *goneRec) {
	f := clock.NewFake(time.Unix(1_700_000_000, 0))
	g := &goneRec{}
	return New(Config{Clock: f, OnGone: g.add}), f, g
}

func TestSettingsAndProducersOf(t *testing.T) {
	r, f, _ := newReg(t)
	r.UpdateSettings("p1", &Settings{ClientType: ClientProducer, PublishingTopics: []string{"orders", "ns%pay"}})
	r.UpdateSettings("p2", &Settings{ClientType: ClientProducer, PublishingTopics: []string{"orders"}})
	r.UpdateSettings("c1", &Settings{ClientType: ClientSimpleConsumer, Group: "g",
		Subscriptions: map[string]FilterExpression{"orders": {Type: FilterTag, Expression: "*"}}})
	if s, ok := r.Settings("c1"); !ok || s.Group != "g" {
		t.Fatalf("settings c1 = %+v %v", s, ok)
	}
	if _, ok := r.Settings("nobody"); ok {
		t.Fatal("settings of an unknown client")
	}
	// Without a stream nobody can receive a check-back.
	if got := r.ProducersOf("orders"); len(got) != 0 {
		t.Fatalf("producers without streams: %+v", got)
	}
	s1 := &recStream{t: t}
	r.Attach("p1", s1)
	f.Advance(time.Second)
	s2 := &recStream{t: t}
	r.Attach("p2", s2)
	got := r.ProducersOf("orders")
	if len(got) != 2 || got[0].ID != "p2" || got[1].ID != "p1" {
		t.Fatalf("ProducersOf(orders) = %+v (want p2, p1: most recently seen first)", got)
	}
	if got := r.ProducersOf("ns%pay"); len(got) != 1 || got[0].ID != "p1" {
		t.Fatalf("ProducersOf(ns%%pay) = %+v", got)
	}
	if got := r.ConsumersOf("g"); len(got) != 1 || got[0].ID != "c1" {
		t.Fatalf("ConsumersOf = %+v", got)
	}
	if err := r.Send("p1", "hello"); err != nil {
		t.Fatal(err)
	}
	if len(s1.sent) != 1 || s1.sent[0] != "hello" {
		t.Fatalf("sent %v", s1.sent)
	}
	if err := r.Send("c1", "x"); !errors.Is(err, ErrNoStream) {
		t.Fatalf("send without stream: %v", err)
	}
	if err := r.Send("zz", "x"); !errors.Is(err, ErrUnknownClient) {
		t.Fatalf("send to unknown: %v", err)
	}
}

func TestLatestStreamWinsAndFailedWriteDetaches(t *testing.T) {
	r, _, _ := newReg(t)
	old := &recStream{t: t}
	l1 := r.Attach("c", old)
	cur := &recStream{t: t}
	l2 := r.Attach("c", cur)
	if err := r.Send("c", 1); err != nil {
		t.Fatal(err)
	}
	if len(old.sent) != 0 || len(cur.sent) != 1 {
		t.Fatalf("old %v cur %v", old.sent, cur.sent)
	}
	// Closing the superseded link does not detach the current one.
	l1.Close()
	if err := r.Send("c", 2); err != nil {
		t.Fatal(err)
	}
	cur.err = errors.New("broken pipe")
	if err := l2.Send(3); err == nil {
		t.Fatal("write error not reported")
	}
	if err := r.Send("c", 4); !errors.Is(err, ErrNoStream) {
		t.Fatalf("after failed write: %v", err)
	}
}

func TestLinkSerialisesSends(t *testing.T) {
	r, _, _ := newReg(t)
	s := &recStream{t: t}
	l := r.Attach("c", s)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if i%2 == 0 {
					_ = l.Send(j)
				} else {
					_ = r.Send("c", j)
				}
			}
		}()
	}
	wg.Wait()
	if len(s.sent) != 160 {
		t.Fatalf("sent %d", len(s.sent))
	}
}

func TestExpiryAndTermination(t *testing.T) {
	r, f, gone := newReg(t)
	r.Touch("a")
	r.UpdateSettings("b", &Settings{ClientType: ClientProducer})
	r.Attach("b", &recStream{t: t})
	f.Advance(100 * time.Second)
	r.Touch("b") // b heartbeats, a does not
	f.Advance(20 * time.Second)
	if got := r.ExpireIdle(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("expired %v, want [a]", got)
	}
	if got := gone.get(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("OnGone %v", got)
	}
	if r.Len() != 1 {
		t.Fatalf("len %d", r.Len())
	}
	r.Terminate("b")
	if got := gone.get(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("OnGone %v", got)
	}
	if _, ok := r.Settings("b"); ok || r.Len() != 0 {
		t.Fatal("terminated client still registered")
	}
	if err := r.Send("b", 1); !errors.Is(err, ErrUnknownClient) {
		t.Fatalf("send after terminate: %v", err)
	}
}

func TestScannerUsesClock(t *testing.T) {
	r, f, gone := newReg(t)
	r.Touch("idle")
	armed := f.Changed()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	<-armed // the scanner is asleep on its timer
	for i := 0; i < 30 && len(gone.get()) == 0; i++ {
		armed = f.Changed()
		f.Advance(5 * time.Second)
		select {
		case <-armed:
		case <-time.After(5 * time.Second):
			t.Fatal("scanner did not re-arm its timer")
		}
	}
	if got := gone.get(); !slices.Equal(got, []string{"idle"}) {
		t.Fatalf("OnGone %v", got)
	}
	if now, seen := f.Now(), time.Unix(1_700_000_000, 0); now.Sub(seen) < DefaultLivenessTimeout {
		t.Fatalf("expired after only %s", now.Sub(seen))
	}
}

// SendToProducer reaches one live producer of the topic, most recently
// seen first, and falls over to the next when a stream write fails.
func TestSendToProducer(t *testing.T) {
	r, f, _ := newReg(t)
	if _, err := r.SendToProducer("orders", func(ClientRef) Command { return "x" }); !errors.Is(err, ErrNoProducer) {
		t.Fatalf("no producers: %v", err)
	}
	r.UpdateSettings("p1", &Settings{ClientType: ClientProducer, PublishingTopics: []string{"ns%orders"},
		Names: map[string]Name{"ns%orders": {Namespace: "ns", Name: "orders"}}})
	r.UpdateSettings("p2", &Settings{ClientType: ClientProducer, PublishingTopics: []string{"ns%orders"}})
	r.UpdateSettings("c1", &Settings{ClientType: ClientPushConsumer, Group: "g",
		Subscriptions: map[string]FilterExpression{"ns%orders": {}}})
	s1, s2 := &recStream{t: t}, &recStream{t: t}
	r.Attach("c1", &recStream{t: t})
	r.Attach("p1", s1)
	f.Advance(time.Second)
	r.Attach("p2", s2)
	build := func(ref ClientRef) Command {
		n := ref.Settings.NameOf("ns%orders")
		return ref.ID + ":" + n.Namespace + "/" + n.Name
	}
	id, err := r.SendToProducer("ns%orders", build)
	if err != nil || id != "p2" || len(s2.sent) != 1 || s2.sent[0] != "p2:/ns%orders" || len(s1.sent) != 0 {
		t.Fatalf("first send: %q %v; p1 %v p2 %v", id, err, s1.sent, s2.sent)
	}
	// p2's stream breaks: the next producer gets it, built for p1 (its own
	// names).
	s2.err = errors.New("broken pipe")
	id, err = r.SendToProducer("ns%orders", build)
	if err != nil || id != "p1" || len(s1.sent) != 1 || s1.sent[0] != "p1:ns/orders" {
		t.Fatalf("fail-over: %q %v; p1 %v", id, err, s1.sent)
	}
	// Every stream broken: a clear error.
	s1.err = errors.New("broken pipe")
	if _, err := r.SendToProducer("ns%orders", build); !errors.Is(err, ErrNoProducer) {
		t.Fatalf("all broken: %v", err)
	}
	if _, err := r.SendToProducer("other", build); !errors.Is(err, ErrNoProducer) {
		t.Fatalf("unknown topic: %v", err)
	}
	var nilSettings *Settings
	if n := nilSettings.NameOf("a%b"); n != (Name{Name: "a%b"}) {
		t.Fatalf("NameOf on nil settings: %+v", n)
	}
}

// Clients lists every registered client with when it came, when it was
// last seen, its settings and whether its control stream is open.
func TestClients(t *testing.T) {
	r, f, _ := newReg(t)
	start := f.Now()
	r.Touch("b-unsettled")
	f.Advance(time.Second)
	r.UpdateSettings("a-producer", &Settings{ClientType: ClientProducer, PublishingTopics: []string{"orders"}, Addr: "10.0.0.7:5555",
		UserAgent: UserAgent{Language: "GOLANG", Version: "5.1.3"}})
	r.Attach("a-producer", &recStream{t: t})
	f.Advance(time.Second)
	r.Touch("a-producer")
	got := r.Clients()
	if len(got) != 2 {
		t.Fatalf("clients: %+v", got)
	}
	a, b := got[0], got[1]
	if a.ID != "a-producer" || a.Settings == nil || a.Settings.Addr != "10.0.0.7:5555" || !a.Stream ||
		!a.Since.Equal(start.Add(time.Second)) || !a.LastSeen.Equal(start.Add(2*time.Second)) {
		t.Fatalf("producer: %+v", a)
	}
	if b.ID != "b-unsettled" || b.Settings != nil || b.Stream || !b.Since.Equal(start) || !b.LastSeen.Equal(start) {
		t.Fatalf("client without settings: %+v", b)
	}
	r.Terminate("a-producer")
	if got := r.Clients(); len(got) != 1 || got[0].ID != "b-unsettled" {
		t.Fatalf("after termination: %+v", got)
	}
}
