package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mqgate/mqgate/internal/testutil"
)

// TestDiskReserveRefusesSendsOnly: while the data disk has less free
// space than the disk reserve, a REST send answers 507 with the v2 code
// upstream gives a full disk (INTERNAL_SERVER_ERROR) and Retry-After, and
// stores nothing; the node stays ready (consumers must reach it to drain:
// /readyz 200 on both listeners, saying that new messages are refused;
// gRPC health SERVING), receives and acks work, and /metrics shows the
// free space, the reserve and the refusals. Once space returns, sends are
// accepted again and /readyz drops the notice.
func TestDiskReserveRefusesSendsOnly(t *testing.T) {
	n, mem, _ := openOnFaultyFS(t, func(c *Config) { c.DiskReserve, c.DiskReservePercent = 4<<20, 0 })
	a := n.Addrs()
	post := func(path, body string) (int, http.Header, string) {
		t.Helper()
		resp, err := http.Post("http://"+a.HTTP+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := func(text string) (int, http.Header, string) {
		return post("/v1/topics/full/messages", fmt.Sprintf(`{"messages":[{"text":%q}]}`, text))
	}
	for i := range 5 {
		if code, _, body := send(fmt.Sprint("before-", i)); code != 200 {
			t.Fatalf("send: %d %s", code, body)
		}
	}
	u, _ := mem.Usage("/")
	mem.SetCapacity(int64(u.Total-u.Free) + 3<<20) // 3 MiB free: below the 4 MiB reserve

	var code int
	var hdr http.Header
	var body string
	accepted := 5
	testutil.Eventually(t, "a send refused for the disk reserve", func() bool {
		// Accepted until the node looks at its disk again (within a second).
		code, hdr, body = send(fmt.Sprint("until-", accepted))
		if code == 200 {
			accepted++
		}
		return code != 200
	})
	var st struct {
		Code    int32
		Name    string
		Message string
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("refusal body %q: %v", body, err)
	}
	if code != http.StatusInsufficientStorage || st.Name != "INTERNAL_SERVER_ERROR" || hdr.Get("Retry-After") == "" ||
		!strings.Contains(st.Message, "the disk is full") || !strings.Contains(st.Message, "nothing was stored") ||
		!strings.Contains(st.Message, "below its reserve of 4.0 MiB") {
		t.Fatalf("send below the reserve: %d %v %s, want 507 INTERNAL_SERVER_ERROR saying the disk is full", code, hdr, body)
	}
	for _, url := range []string{"http://" + a.HTTP + "/readyz", "http://" + a.Metrics + "/readyz"} {
		if code, body := get(url); code != 200 || !strings.Contains(body, "the disk is full") || !strings.Contains(body, "new messages are refused") {
			t.Fatalf("%s below the reserve: %d %q, want 200 saying new messages are refused", url, code, body)
		}
	}
	cc, err := grpc.NewClient(a.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if r, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: messagingHealth}); err != nil ||
		r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("messaging health below the reserve: %v %v, want SERVING", r, err)
	}

	// Consumers drain what was accepted.
	got := map[string]bool{}
	for len(got) < accepted {
		code, _, body := post("/v1/groups/g/topics/full:receive?body=text", `{"maxMessages":32,"waitDuration":"0s"}`)
		var rr struct {
			Messages []struct{ Text, ReceiptHandle string }
		}
		if code != 200 || json.Unmarshal([]byte(body), &rr) != nil || len(rr.Messages) == 0 {
			t.Fatalf("receive below the reserve after %d: %d %s", len(got), code, body)
		}
		for _, m := range rr.Messages {
			if code, _, body := post("/v1/groups/g/topics/full:ack", fmt.Sprintf(`{"receiptHandles":[%q]}`, m.ReceiptHandle)); code != 200 || !strings.Contains(body, `"OK"`) {
				t.Fatalf("ack below the reserve: %d %s", code, body)
			}
			got[m.Text] = true
		}
	}
	for i := range 5 {
		if !got[fmt.Sprint("before-", i)] {
			t.Fatalf("before-%d not received: %v", i, got)
		}
	}
	if got["refused?"] || len(got) != accepted {
		t.Fatalf("received %v, want the %d accepted messages", got, accepted)
	}
	if code, body := get("http://" + a.Metrics + "/metrics"); code != 200 ||
		!strings.Contains(body, `mqgate_admission_rejections_total{mqgate_reason="disk_full"`) ||
		!regexp.MustCompile(`(?m)^mqgate_store_disk_free_bytes\{.*\} \d`).MatchString(body) ||
		!regexp.MustCompile(`(?m)^mqgate_store_disk_reserve_bytes\{.*\} 4\.194304e\+06$`).MatchString(body) {
		t.Fatalf("/metrics below the reserve lacks the disk series:\n%s", body)
	}

	mem.SetCapacity(0) // room again
	testutil.Eventually(t, "sends accepted once space returned", func() bool {
		code, _, _ := send("after")
		return code == 200
	})
	if code, body := get("http://" + a.HTTP + "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz once space returned: %d %q", code, body)
	}
}
