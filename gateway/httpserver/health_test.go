package httpserver

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMountHealth(t *testing.T) {
	for _, c := range []struct {
		name      string
		ready     func() (string, error)
		notice    func() string
		code      int
		readyBody string
	}{
		{"no readiness check", nil, nil, 200, "ready\n"},
		{"ready", func() (string, error) { return "", nil }, func() string { return "" }, 200, "ready\n"},
		{"ready with a role", func() (string, error) { return "follower of member 2", nil }, nil, 200, "ready: follower of member 2\n"},
		{"ready with a notice", func() (string, error) { return "", nil }, func() string { return "the disk is full" }, 200, "ready; the disk is full\n"},
		{"ready with a role and a notice", func() (string, error) { return "leader", nil }, func() string { return "the disk is full" }, 200, "ready: leader; the disk is full\n"},
		{"not ready", func() (string, error) { return "", errors.New("the store cannot write") }, func() string { return "the disk is full" }, 503, "not ready: the store cannot write\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mux := http.NewServeMux()
			MountHealth(mux, c.ready, c.notice)
			get := func(path string) *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				return rec
			}
			if r := get("/healthz"); r.Code != 200 || r.Body.String() != "ok\n" {
				t.Fatalf("/healthz: %d %q", r.Code, r.Body.String())
			}
			if r := get("/readyz"); r.Code != c.code || r.Body.String() != c.readyBody || r.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Fatalf("/readyz: %d %q %q", r.Code, r.Body.String(), r.Header().Get("Content-Type"))
			}
		})
	}
}
