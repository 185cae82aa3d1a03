package broker

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// TestDiskReserveDrain: once less than the disk reserve is free, sends
// are refused as a whole (KindDiskFull, nothing of them stored: plain,
// batched with a delayed message, classic), while consumers receive,
// change the invisibility of and acknowledge every message accepted
// before, to the end; once space returns, sends are accepted again
// without a restart.
func TestDiskReserveDrain(t *testing.T) {
	// The reserve holds what draining writes (POP journal records and
	// their queue entries) and what the store writes later for messages
	// it accepted (their index entries and the index's slot table, 512
	// KiB, written at the next checkpoint).
	const reserve = 1 << 20
	e := newEnvWith(t, func(o *storage.Options) { o.DiskReserve, o.DiskReservePercent = reserve, -1 })
	e.topic("T", model.TopicNormal)
	e.topic("M", model.TopicMixed)
	e.group("g", 0, false)
	u, _ := e.fs.Usage("/")
	e.fs.SetCapacity(int64(u.Total-u.Free) + reserve + 256<<10)
	e.clk.Advance(time.Second)
	e.store.Space() // the store's look at its disk, once a second
	body := bytes.Repeat([]byte("x"), 1024)
	var accepted []string
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatalf("%d sends accepted, none refused (%+v)", i, e.store.Space())
		}
		e.clk.Advance(10 * time.Millisecond)
		id := fmt.Sprintf("m-%d", i)
		res, err := e.b.Send(e.ctx, "T", []*model.Message{{Topic: "T", ID: id, Body: body}}, model.Producer{})
		if err != nil {
			if mqerr.KindOf(err) != mqerr.KindDiskFull || !strings.Contains(mqerr.Message(err), "the disk is full") ||
				!strings.Contains(mqerr.Message(err), "nothing was stored") {
				t.Fatalf("send %d: %v (kind %v), want a disk-full refusal", i, err, mqerr.KindOf(err))
			}
			break
		}
		if res[0].Err != nil {
			t.Fatalf("send %d: %v", i, res[0].Err)
		}
		accepted = append(accepted, id)
	}
	if len(accepted) < 100 {
		t.Fatalf("only %d sends accepted above the reserve", len(accepted))
	}
	if err := e.store.WaitDispatched(e.ctx, e.store.Answered()); err != nil {
		t.Fatal(err)
	}

	// Every way in is refused, and stores nothing.
	_, end := e.store.LogRange()
	if _, err := e.b.Send(e.ctx, "M", []*model.Message{{Topic: "M", ID: "now", Body: body},
		{Topic: "M", ID: "later", Body: body, DeliveryTime: e.clk.Now().Add(time.Minute)}}, model.Producer{}); mqerr.KindOf(err) != mqerr.KindDiskFull {
		t.Fatalf("batch with a delayed message: %v, want a disk-full refusal", err)
	}
	if _, err := e.b.Classic().SendRecords(e.ctx, ClassicSend{Topic: "T", QueueID: -1,
		Records: []*message.Message{classicRecord("classic", "UNIQ_KEY", "C1")}}); mqerr.KindOf(err) != mqerr.KindDiskFull {
		t.Fatalf("classic send: %v, want a disk-full refusal", err)
	}
	if _, now := e.store.LogRange(); now != end {
		t.Fatalf("refused sends stored %d bytes", now-end)
	}

	// Consumers drain to the end: their records go into the reserve.
	got := map[string]bool{}
	changed := false
	for len(got) < len(accepted) {
		ds, err := e.receive("g", "T", 32, 30*time.Second)
		if err != nil {
			t.Fatalf("receive after %d of %d messages: %v (%+v)", len(got), len(accepted), err, e.store.Space())
		}
		for _, d := range ds {
			h := d.ReceiptHandle
			if !changed {
				if h, err = e.b.ChangeInvisible(e.ctx, "g", "T", h, time.Minute); err != nil {
					t.Fatalf("change invisibility: %v", err)
				}
				changed = true
			}
			if errs := e.b.Ack(e.ctx, "g", "T", []string{h}); errs[0] != nil {
				t.Fatalf("ack %s: %v", d.ID, errs[0])
			}
			if got[d.ID] {
				t.Fatalf("%s delivered twice", d.ID)
			}
			got[d.ID] = true
		}
	}
	for _, id := range accepted {
		if !got[id] {
			t.Fatalf("accepted message %s never delivered", id)
		}
	}
	if ds, err := e.receive("g", "T", 32, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("after the drain: %d more, %v", len(ds), err)
	}
	e.clk.Advance(10 * time.Millisecond)
	if _, err := e.b.Send(e.ctx, "T", []*model.Message{{Topic: "T", ID: "still-full", Body: body}}, model.Producer{}); mqerr.KindOf(err) != mqerr.KindDiskFull {
		t.Fatalf("send after the drain, disk still below its reserve: %v", err)
	}

	// Space returns (an operator grew the disk): sends are accepted again.
	e.fs.SetCapacity(0)
	e.clk.Advance(10 * time.Millisecond)
	ids := e.send("T", 1, "after")
	ds, err := e.receive("g", "T", 32, 30*time.Second)
	if err != nil || len(ds) != 1 || ds[0].ID != ids[0] {
		t.Fatalf("receive after space returned: %v %v", err, ds)
	}
}
