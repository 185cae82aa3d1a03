package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/auth"
)

// fakeBroker answers the console endpoints from fixed data.
type fakeBroker struct {
	page       broker.DeadLetterPage
	redriveMax int
	redriveErr error
}

func (f *fakeBroker) MessageTotals() (int64, int64) { return 7, 3 }

func (f *fakeBroker) DeadLetters(_ context.Context, group string, max int) (broker.DeadLetterPage, error) {
	if group != "g" {
		return broker.DeadLetterPage{}, mqerr.Errorf(mqerr.KindGroupNotFound, "group %q does not exist", group)
	}
	return f.page, nil
}

func (f *fakeBroker) RedriveDeadLetters(_ context.Context, group string, max int) (broker.RedriveResult, error) {
	f.redriveMax = max
	if f.redriveErr != nil {
		return broker.RedriveResult{}, f.redriveErr
	}
	return broker.RedriveResult{Redriven: []broker.Redriven{{MessageID: "m1", Topic: "t", QueueOffset: 4}}, Pending: 0}, nil
}

// apiRecorder stands in for the REST API: it records what reached it.
type apiRecorder struct {
	path, rawQuery, authorization, date string
}

func (a *apiRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.path, a.rawQuery = r.URL.Path, r.URL.RawQuery
	a.authorization, a.date = r.Header.Get("Authorization"), r.Header.Get("X-Mq-Date-Time")
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"topics":[]}`)
}

// now is the console's clock: real time (the authenticator checks dates
// against its own clock), fixed for the test.
var now = time.Now().UTC().Truncate(time.Second)

func newServer(t *testing.T, withAuth bool) (*httptest.Server, *fakeBroker, *apiRecorder) {
	t.Helper()
	fb := &fakeBroker{page: broker.DeadLetterPage{Topic: "%DLQ%g", Pending: 2, Messages: []*model.Delivered{{
		Message:        model.Message{ID: "m1", Tag: "card", Keys: []string{"k"}, Body: []byte(strings.Repeat("x", previewBytes+10))},
		QueueOffset:    4,
		DLQOriginTopic: "t",
	}}}}
	api := &apiRecorder{}
	o := Options{API: api, Broker: fb, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}
	if withAuth {
		users, err := auth.Parse([]byte("users:\n  - accessKey: ops\n    secretKey: ops-secret\n    admin: true\n  - accessKey: app\n    secretKey: app-secret\n"))
		if err != nil {
			t.Fatal(err)
		}
		o.Auth = auth.New(users)
	}
	srv := httptest.NewServer(New(o))
	t.Cleanup(srv.Close)
	return srv, fb, api
}

func do(t *testing.T, srv *httptest.Server, method, path, ak, sk string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" {
		req.Header.Set("X-Mq-Console", "1")
	}
	if ak != "" {
		req.SetBasicAuth(ak, sk)
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

func TestPagesAndEndpointsWithoutAuth(t *testing.T) {
	srv, fb, api := newServer(t, false)
	if code, h, _ := do(t, srv, "GET", "/console", "", ""); code != http.StatusMovedPermanently || h.Get("Location") != "/console/" {
		t.Fatalf("/console: %d %v", code, h)
	}
	for path, want := range map[string]string{"/console/": "<canvas id=\"rates\"", "/console/app.js": "async function refresh", "/console/app.css": "--send"} {
		if code, _, body := do(t, srv, "GET", path, "", ""); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want %q in the body", path, code, want)
		}
	}
	if code, _, _ := do(t, srv, "POST", "/console/app.js", "", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST a page: %d", code)
	}
	if code, _, _ := do(t, srv, "GET", "/console/nope.js", "", ""); code != http.StatusNotFound {
		t.Errorf("missing page: %d", code)
	}

	code, _, body := do(t, srv, "GET", "/console/api/stats", "", "")
	var st Stats
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Put != 7 || st.Get != 3 || st.TimeMillis != now.UnixMilli() {
		t.Fatalf("stats: %d %s", code, body)
	}

	code, _, body = do(t, srv, "GET", "/console/api/groups/g/deadletters?max=5", "", "")
	var dl DeadLetters
	if code != http.StatusOK || json.Unmarshal([]byte(body), &dl) != nil || dl.Pending != 2 || len(dl.Messages) != 1 {
		t.Fatalf("dead letters: %d %s", code, body)
	}
	if m := dl.Messages[0]; m.OriginTopic != "t" || m.BodySize != previewBytes+10 || !m.BodyTruncated || len(m.Body) != previewBytes || m.Tag != "card" {
		t.Fatalf("dead letter: %+v", m)
	}
	if code, _, body := do(t, srv, "GET", "/console/api/groups/other/deadletters", "", ""); code != http.StatusNotFound || !strings.Contains(body, "does not exist") {
		t.Fatalf("unknown group: %d %s", code, body)
	}
	if code, _, _ := do(t, srv, "GET", "/console/api/groups/g/deadletters?max=x", "", ""); code != http.StatusBadRequest {
		t.Fatalf("bad max: %d", code)
	}
	if code, _, body := do(t, srv, "POST", "/console/api/groups/g/deadletters/redrive?max=9", "", ""); code != http.StatusOK || !strings.Contains(body, `"redriven":[{"messageId":"m1","topic":"t","queueId":0,"queueOffset":4}]`) || fb.redriveMax != 9 {
		t.Fatalf("redrive: %d %s (max %d)", code, body, fb.redriveMax)
	}
	fb.redriveErr = mqerr.Errorf(mqerr.KindStoreUnavailable, "store down")
	if code, _, _ := do(t, srv, "POST", "/console/api/groups/g/deadletters/redrive", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("failed redrive: %d", code)
	}
	if code, _, _ := do(t, srv, "GET", "/console/api/groups/g/deadletters/redrive", "", ""); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Fatalf("GET redrive: %d", code)
	}
	// A change without the console's header (a form of another site).
	req, err := http.NewRequest("POST", srv.URL+"/console/api/groups/g/deadletters/redrive", nil)
	if err != nil {
		t.Fatal(err)
	}
	fb.redriveMax = -1
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden || fb.redriveMax != -1 {
		t.Fatalf("redrive without X-Mq-Console: %v %v (max %d)", err, resp, fb.redriveMax)
	} else {
		resp.Body.Close()
	}
	if code, _, _ := do(t, srv, "GET", "/console/api/nothing", "", ""); code != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d", code)
	}

	// /console/v1/... reaches the REST API as /v1/..., unsigned without auth.
	if code, _, _ := do(t, srv, "GET", "/console/v1/messages?key=a%20b", "", ""); code != http.StatusOK || api.path != "/v1/messages" || api.rawQuery != "key=a%20b" || api.authorization != "" {
		t.Fatalf("REST hand-off: %d %+v", code, api)
	}
}

func TestAuth(t *testing.T) {
	srv, _, api := newServer(t, true)
	paths := []string{"/console", "/console/", "/console/app.js", "/console/api/stats", "/console/api/groups/g/deadletters", "/console/v1/topics"}
	for _, p := range paths {
		if code, h, _ := do(t, srv, "GET", p, "", ""); code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s without credentials: %d %q", p, code, h.Get("WWW-Authenticate"))
		}
		if code, _, _ := do(t, srv, "GET", p, "ops", "nope"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong secret: %d", p, code)
		}
		if code, _, _ := do(t, srv, "GET", p, "nobody", "x"); code != http.StatusUnauthorized {
			t.Errorf("%s as an unknown user: %d", p, code)
		}
		if code, _, _ := do(t, srv, "GET", p, "app", "app-secret"); code != http.StatusForbidden {
			t.Errorf("%s as a non-admin: %d", p, code)
		}
	}
	if code, _, _ := do(t, srv, "POST", "/console/api/groups/g/deadletters/redrive", "", ""); code != http.StatusUnauthorized {
		t.Errorf("redrive without credentials: %d", code)
	}
	req, err := http.NewRequest("POST", srv.URL+"/console/v1/topics", strings.NewReader(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("ops", "ops-secret")
	api.path = ""
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden || api.path != "" {
		t.Errorf("signed-in POST without X-Mq-Console: %v %v, reached %q", err, resp, api.path)
	} else {
		resp.Body.Close()
	}
	if code, _, _ := do(t, srv, "GET", "/console/", "ops", "ops-secret"); code != http.StatusOK {
		t.Errorf("page as admin: %d", code)
	}
	// The REST API gets the v2 signature of the same credentials.
	if code, _, _ := do(t, srv, "GET", "/console/v1/topics", "ops", "ops-secret"); code != http.StatusOK {
		t.Fatalf("REST as admin: %d", code)
	}
	date := now.Format(auth.DateTimeLayout)
	if api.path != "/v1/topics" || api.date != date || api.authorization != auth.V2Sign("ops", "ops-secret", date) {
		t.Fatalf("REST hand-off: %+v", api)
	}
	a := auth.New(mustUsers(t))
	if u, err := a.V2(api.authorization, api.date); err != nil || u.AccessKey != "ops" {
		t.Fatalf("the signature does not verify: %v", err)
	}
}

func mustUsers(t *testing.T) *auth.Users {
	u, err := auth.Parse([]byte("users:\n  - accessKey: ops\n    secretKey: ops-secret\n    admin: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}
