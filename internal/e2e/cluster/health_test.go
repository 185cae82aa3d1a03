package cluster

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// Each member's metrics listener answers /healthz and /readyz for the
// member itself (its HTTP listener passes them to the leader): the leader
// and each follower are ready and say which they are; a member left alone
// (both others killed) is still alive but not ready once it knows no
// leader, and ready again when a majority is back.
func TestMemberHealth(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	get := func(m *member, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + m.proc.Metrics + path)
		if err != nil {
			t.Fatalf("member %d %s: %v", m.id, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, m := range g.members {
		want := fmt.Sprintf("ready: follower of member %d\n", l.id)
		if m == l {
			want = "ready: leader\n"
		}
		await(fmt.Sprintf("member %d to say %q", m.id, want), func() bool {
			code, body := get(m, "/readyz")
			return code == http.StatusOK && body == want
		})
		if code, body := get(m, "/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("member %d /healthz: %d %q", m.id, code, body)
		}
	}

	others := g.others(l)
	for _, m := range others {
		m.proc.Kill9()
	}
	await("the lone member to be not ready", func() bool {
		code, body := get(l, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "no leader known")
	})
	if code, _ := get(l, "/healthz"); code != http.StatusOK {
		t.Fatalf("the lone member's /healthz: %d, want 200 (it is alive)", code)
	}
	g.start(others[0])
	await("the lone member to be ready again", func() bool {
		code, _ := get(l, "/readyz")
		return code == http.StatusOK
	})
}
