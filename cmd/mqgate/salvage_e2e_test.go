package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/sdk"
)

// TestSalvageEndToEnd: messages sent through the real server, one of them
// damaged on disk in the middle of the log. `mqgate verify` says how many
// records a salvage would bring back and from where; `mqgate repair
// --salvage --yes` cuts the damage out and appends them again; the
// restarted server finds them by id and by key, a group that had consumed
// some before the damage receives the rest, and a new group all but the
// damaged one, each once.
func TestSalvageEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const n, bad, consumed = 60, 30, 10
	dataDir := t.TempDir()
	args := []string{"--auto-create", "--flush", "sync"}
	p := testutil.Start(t, testutil.StartOptions{DataDir: dataDir, Args: args, NoRemoting: true})
	bin := testutil.Binary(t)
	c := cli{t: t, bin: bin, addr: p.GRPC}
	c.ok("", "topic", "create", "orders", "--queues", "2")
	c.ok("", "group", "create", "billing")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	client, err := sdk.Dial(ctx, p.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := client.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) string { return fmt.Sprintf("salvage-body-%03d-%s", i, strings.Repeat("x", 2000)) }
	ids := make([]string, n)
	for i := range n {
		r, err := pr.Send(ctx, &sdk.Message{Topic: "orders", Body: []byte(body(i)), Keys: []string{fmt.Sprintf("order-%03d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.MessageID
	}
	client.Close(ctx)
	// billing consumes the first messages before the damage.
	seen := receiveAll(t, c, "billing", consumed)
	if len(seen) != consumed {
		t.Fatalf("billing received %d messages before the damage, want %d", len(seen), consumed)
	}
	p.Stop(30 * time.Second)

	// Damage message bad on disk: one byte of its body.
	store := filepath.Join(dataDir, "store")
	segs, _ := filepath.Glob(filepath.Join(store, "commitlog", "*.log"))
	damaged := false
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(body(bad))); i >= 0 {
			b[i+len("salvage-body-")] ^= 0xff
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("message bad is in no segment")
	}

	code, out, errOut := runCmd("verify", "--data-dir", dataDir)
	wantSalvage := fmt.Sprintf("salvage: %d of them (originally at log positions ", n-bad-1)
	if code != exitFail || !strings.Contains(out, "result: DAMAGED") || !strings.Contains(out, wantSalvage) || !strings.Contains(out, "--salvage") {
		t.Fatalf("verify: exit %d, want 1 and %q\n%s%s", code, wantSalvage, out, errOut)
	}
	code, out, errOut = runCmd("repair", "--data-dir", dataDir, "--salvage", "--yes")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("%d appended again", n-bad-1)) {
		t.Fatalf("repair --salvage --yes: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCmd("verify", "--data-dir", dataDir); code != exitOK || !strings.Contains(out, "result: no damage") {
		t.Fatalf("verify after the salvage: exit %d\n%s", code, out)
	}

	p = testutil.Start(t, testutil.StartOptions{DataDir: dataDir, Args: args, NoRemoting: true})
	c.addr = p.GRPC
	// By id and by key, a message after the damage.
	after := bad + 7
	if out := c.ok("", "message", "show", ids[after]); !strings.Contains(out, body(after)[:20]) {
		t.Fatalf("message show %s:\n%s", ids[after], out)
	}
	if out := c.ok("", "message", "show", fmt.Sprintf("order-%03d", after)); !strings.Contains(out, ids[after]) {
		t.Fatalf("message show by key:\n%s", out)
	}
	// The damaged message is gone; every other arrives once.
	rest := receiveAll(t, c, "billing", n)
	all := receiveAll(t, c, "audit", n)
	for name, got := range map[string]map[string]int{"billing": rest, "audit": all} {
		for i, id := range ids {
			want := 1
			if i == bad || name == "billing" && seen[id] > 0 {
				want = 0
			}
			if got[id] != want {
				t.Errorf("%s received message %d (%s) %d times, want %d", name, i, id, got[id], want)
			}
		}
	}
}

// receiveAll receives and acks messages of orders as group until max or
// none come within a few seconds, and counts them by id.
func receiveAll(t *testing.T, c cli, group string, max int) map[string]int {
	t.Helper()
	got := map[string]int{}
	total := 0
	for total < max {
		out := c.ok("", "receive", "--group", group, "--topic", "orders", "--max", fmt.Sprint(min(16, max-total)), "--wait", "3s", "--json")
		ms := jsonLines(t, out)
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			got[m["message_id"].(string)]++
			total++
		}
	}
	return got
}
