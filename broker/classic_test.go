package broker

import (
	"context"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/storage/message"
)

func (e *env) classic() *Classic {
	e.t.Helper()
	c, err := e.b.OpenClassic(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func closeClassic(t *testing.T, c *Classic) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A send-back waiting for its delay survives a restart and is delivered
// to %RETRY%<group> when due, with its properties intact.
func TestClassicSendBackSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.topic("T", model.TopicNormal)
	c := e.classic()
	r := &message.Message{Body: []byte("x")}
	r.Set("UNIQ_KEY", "U1")
	r.Set("KEYS", "k")
	sent, err := c.SendRecords(e.ctx, ClassicSend{Topic: "T", QueueID: 0, Records: []*message.Message{r}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendBack(e.ctx, SendBack{Phys: sent.Entries[0].PhysOffset, Group: "CG", MaxReconsumeTimes: -1})
	if err != nil || res.Topic != "%RETRY%CG" || res.ReconsumeTimes != 1 || res.Due.Sub(e.clk.Now()) != 10*time.Second {
		t.Fatalf("%+v %v", res, err)
	}
	closeClassic(t, c)
	e.restart()
	c = e.classic()
	defer closeClassic(t, c)
	e.clk.Advance(11 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, hi := c.QueueRange("%RETRY%CG", 0); hi == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the staged retry was lost across the restart")
		}
		time.Sleep(2 * time.Millisecond)
	}
	m, err := c.RecordAt("%RETRY%CG", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.UniqKey() != "U1" || string(m.Body) != "x" {
		t.Fatalf("%+v", m)
	}
	if v, _ := m.Get("RETRY_TOPIC"); v != "T" {
		t.Fatalf("RETRY_TOPIC %q", v)
	}
	for _, k := range []string{"REAL_TOPIC", "REAL_QID", "__MQG_DUE_MS"} {
		if _, ok := m.Get(k); ok {
			t.Fatalf("bookkeeping property %s left on the delivered record", k)
		}
	}
}

type fakeSender struct {
	claims bool
	reach  bool
	asked  int
}

func (f *fakeSender) CheckTransaction(context.Context, string, *model.Delivered, string) bool {
	f.asked++
	return f.reach
}

func (f *fakeSender) ClaimsTransaction(string, string) bool { return f.claims }

// The fan-out asks in order until a producer is reached, except that a
// sender claiming the message is the only one asked.
func TestCheckBackFanOut(t *testing.T) {
	grpc, classic := &fakeSender{reach: true}, &fakeSender{}
	if !(CheckBackFanOut{grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || grpc.asked != 1 || classic.asked != 0 {
		t.Fatalf("unclaimed: grpc %d classic %d", grpc.asked, classic.asked)
	}
	grpc.asked, classic.claims = 0, true
	if (CheckBackFanOut{grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || grpc.asked != 0 || classic.asked != 1 {
		t.Fatalf("claimed by classic: grpc %d classic %d", grpc.asked, classic.asked)
	}
	grpc.reach, classic.claims, classic.reach = false, false, true
	if !(CheckBackFanOut{nil, grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || classic.asked != 2 {
		t.Fatalf("fall-through: classic %d", classic.asked)
	}
}
