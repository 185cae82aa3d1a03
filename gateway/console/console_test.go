package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func do(t *testing.T, srv *httptest.Server, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// The console serves its pages, and only them: the data comes from the
// REST API, which the pages call themselves.
func TestPages(t *testing.T) {
	srv := httptest.NewServer(New())
	t.Cleanup(srv.Close)
	if code, h, _ := do(t, srv, "GET", "/console"); code != http.StatusMovedPermanently || h.Get("Location") != "/console/" {
		t.Fatalf("/console: %d %v", code, h)
	}
	for path, want := range map[string]string{
		"/console/":        `<canvas id="rates"`,
		"/console/app.js":  "function hmacSHA1",
		"/console/app.css": "--send",
	} {
		code, h, body := do(t, srv, "GET", path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want %q in the body", path, code, want)
		}
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	if code, h, _ := do(t, srv, "POST", "/console/app.js"); code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST a page: %d", code)
	}
	for _, path := range []string{"/console/nope.js", "/console/api/stats", "/console/v1/topics"} {
		if code, _, _ := do(t, srv, "GET", path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
}

// The page calls only the REST API (/v1/), never an endpoint of the
// console's own, and loads nothing from elsewhere.
func TestPageUsesTheRESTAPIOnly(t *testing.T) {
	b, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, bad := range []string{"api/", "console/v1", "http://", "https://"} {
		if strings.Contains(js, `"`+bad) {
			t.Errorf("app.js names %q", bad)
		}
	}
	html, err := assets.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(html), "http://") || strings.Contains(string(html), "https://") || strings.Contains(string(html), "style=") {
		t.Error("index.html loads from elsewhere or carries inline styles (the CSP refuses them)")
	}
}
