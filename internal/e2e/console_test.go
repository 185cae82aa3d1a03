package e2e

// The web console (/console on the HTTP port) in a real headless Chromium
// driven by chromedp: what it lists, plots, finds, creates, deletes and
// redrives, asserted through the page's DOM against a real mqgate.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mqgate/mqgate/internal/testutil"
)

// chromiumBinary finds Chromium, failing the test when it is missing
// unless MQGATE_E2E_NO_CHROMIUM=1 asks to skip.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MQGATE_E2E_NO_CHROMIUM") == "1" {
		t.Skip("Chromium is not installed and MQGATE_E2E_NO_CHROMIUM=1: skipping the console test")
	}
	t.Fatal("Chromium is not installed: the console test drives it headless. Install it (Debian: apt-get install -y chromium; .ci/deps does) or set MQGATE_E2E_NO_CHROMIUM=1 to skip")
	return ""
}

// browser starts one headless Chromium that reaches nothing but loopback.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumBinary(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("metrics-recording-only", true),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	return ctx
}

// waitJS waits (polling the page, no fixed sleep) until expr is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		status, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#status")))
		t.Fatalf("waiting for %s (%s): %v; console status %q", what, expr, err, status)
	}
}

// cellText is the JS expression of a table row's cell text ("" if absent).
func cellText(table, attr, name, class string) string {
	return fmt.Sprintf(`((document.querySelector('#%s tr[data-%s=%q] td.%s')||{}).textContent||"")`, table, attr, name, class)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("MQGATE_TEST_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleInBrowser(t *testing.T) {
	e2e(t)
	ctx := browser(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("console-orders"), uniq("console-billing")
	dlqTopic, dlqGroup := uniq("console-payments"), uniq("console-strict")
	r.setup(topic, group)
	r.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"queues":1}`, dlqTopic))
	r.ok("POST", "/v1/groups", fmt.Sprintf(`{"name":%q,"maxDeliveryAttempts":1}`, dlqGroup))

	base := "http://" + p.HTTP + "/console/"
	if err := chromedp.Do(ctx, chromedp.Navigate(base),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the topic listed", cellText("topics", "topic", topic, "name")+` === `+strconv.Quote(topic))
	waitJS(t, ctx, "a first rate sample", `Number(document.querySelector('#rates').dataset.points) >= 1`)

	// Send 6 messages (2 with a key), receive 2 of them as group without
	// acking: backlog 6, 2 in flight.
	r.ok("POST", "/v1/topics/"+topic+"/messages",
		`{"messages":[{"text":"order one","keys":["order-1"]},{"text":"order two"},{"text":"order three"},{"text":"order four"},{"text":"order five"},{"text":"{\"id\":6,\"total\":12.5}","keys":["order-6"]}]}`)
	var inFlight int
	for inFlight < 2 {
		got := r.receive(group, topic, "", fmt.Sprintf(`{"maxMessages":%d,"invisibleDuration":"60s","waitDuration":"5s"}`, 2-inFlight))
		inFlight += len(got)
	}
	waitJS(t, ctx, "the group's backlog", cellText("groups", "group", group, "backlog")+` === "6"`)
	waitJS(t, ctx, "the group's in-flight count", cellText("groups", "group", group, "inflight")+` === "2"`)
	waitJS(t, ctx, "the topic's stored count and backlog", cellText("topics", "topic", topic, "stored")+` === "6" && `+cellText("topics", "topic", topic, "backlog")+` === "6"`)
	waitJS(t, ctx, "the send rate plotted", `Number(document.querySelector('#rates').dataset.maxSend) > 0 && Number(document.querySelector('#rates').dataset.points) >= 2`)
	waitJS(t, ctx, "the backlog plotted", `document.querySelector('#backlog').dataset.last === "6"`)
	screenshot(t, ctx, "overview")

	// Lookup by key shows the body.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#lookup input[name=key]`), "order-6"),
		chromedp.Click(chromedp.CSS(`#lookup button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the lookup's body preview", `[...document.querySelectorAll('#lookup-results td.body')].map(td => td.textContent).join("|") === '{"id":6,"total":12.5}'`)

	// Create, then delete a topic through the forms and buttons.
	made := uniq("console-made")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), made),
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=queues]`), "2"),
		chromedp.Click(chromedp.CSS(`#create-topic button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the created topic listed", cellText("topics", "topic", made, "name")+` === `+strconv.Quote(made))
	if got := r.ok("GET", "/v1/topics/"+made, ""); fmt.Sprint(got["topic"].(map[string]any)["queues"]) != "2" {
		t.Fatalf("created topic: %v", got)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#topics tr[data-topic=%q] button.delete`, made)))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the deleted topic gone", fmt.Sprintf(`document.querySelector('#topics tr[data-topic=%q]') === null`, made))
	if code, _ := r.call("GET", "/v1/topics/"+made, ""); code != http.StatusNotFound {
		t.Fatalf("deleted topic: HTTP %d", code)
	}

	// A dead letter: one delivery attempt, made due at once and never acked.
	r.ok("POST", "/v1/topics/"+dlqTopic+"/messages", `{"messages":[{"text":"payment 42","keys":["pay-42"],"tag":"card"}]}`)
	got := r.receive(dlqGroup, dlqTopic, "", `{"maxMessages":1,"invisibleDuration":"10s","waitDuration":"5s"}`)
	if len(got) != 1 {
		t.Fatalf("receive: %v", got)
	}
	r.ok("POST", "/v1/groups/"+dlqGroup+"/topics/"+dlqTopic+":changeInvisibleDuration",
		fmt.Sprintf(`{"receiptHandle":%q,"invisibleDuration":"0s"}`, got[0]["receiptHandle"]))
	// The next receive finds the attempt used up and moves the message to
	// the dead-letter queue.
	if got := r.receive(dlqGroup, dlqTopic, "", `{"maxMessages":1,"invisibleDuration":"10s","waitDuration":"0s"}`); len(got) != 0 {
		t.Fatalf("delivered past max attempts: %v", got)
	}
	waitJS(t, ctx, "the dead letter counted", cellText("groups", "group", dlqGroup, "dlq")+` === "1"`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#groups tr[data-group=%q] button.show-dlq`, dlqGroup)))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the dead letter listed", `[...document.querySelectorAll('#dlq td.body')].map(td => td.textContent).join("|") === "payment 42" && document.querySelector('#dlq td.origin').textContent === `+strconv.Quote(dlqTopic))
	screenshot(t, ctx, "deadletters")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#dlq-redrive`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the dead letter redriven", cellText("groups", "group", dlqGroup, "dlq")+` === "0" && document.querySelector('#dlq-pending').textContent === "0"`)
	again := r.receive(dlqGroup, dlqTopic, "?body=text", `{"maxMessages":1,"invisibleDuration":"10s","waitDuration":"10s"}`)
	if len(again) != 1 || again[0]["text"] != "payment 42" || again[0]["tag"] != "card" || fmt.Sprint(again[0]["deliveryAttempt"]) != "1" {
		t.Fatalf("redriven message received: %v", again)
	}
	r.ok("POST", "/v1/groups/"+dlqGroup+"/topics/"+dlqTopic+":ack", fmt.Sprintf(`{"receiptHandles":[%q]}`, again[0]["receiptHandle"]))

	// With auth on, the browser signs in with Basic credentials (here in
	// the URL) and the page's own calls reuse them: it lists a topic and
	// creates one through the signed REST hand-off. A second tab of the
	// same browser.
	pa := startWithConsoleUsers(t)
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	secured := uniq("console-secured")
	resp, err := http.Get("http://" + pa.HTTP + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/console/ with auth on, without credentials: HTTP %d", resp.StatusCode)
	}
	if err := chromedp.Do(tab, chromedp.Navigate("http://ops:ops-secret-1@"+pa.HTTP+"/console/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, "the first poll with credentials", `Number(document.querySelector('#rates').dataset.points) >= 1 && document.querySelector('#status').className !== "error"`)
	if err := chromedp.Do(tab,
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), secured),
		chromedp.Click(chromedp.CSS(`#create-topic button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, "the topic created with auth on", cellText("topics", "topic", secured, "name")+` === `+strconv.Quote(secured))
}

// startWithConsoleUsers starts mqgate with auth on: "ops" an admin, "app"
// not.
func startWithConsoleUsers(t *testing.T) *testutil.Proc {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(`users:
  - accessKey: app
    secretKey: app-secret-1
  - accessKey: ops
    secretKey: ops-secret-1
    admin: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, testutil.StartOptions{Args: []string{"--auth-file", users}})
}

// With auth on, the console and its endpoints need an admin user's Basic
// credentials: 401 without or with wrong ones, 403 for a non-admin.
func TestConsoleAuth(t *testing.T) {
	e2e(t)
	p := startWithConsoleUsers(t)
	c := &http.Client{Timeout: 30 * time.Second}
	get := func(path, ak, sk string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+p.HTTP+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ak != "" {
			req.SetBasicAuth(ak, sk)
		}
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
	for _, path := range []string{"/console", "/console/", "/console/app.js", "/console/api/stats", "/console/v1/topics", "/console/api/groups/g/deadletters"} {
		if code, h, _ := get(path, "", ""); code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s without credentials: HTTP %d, WWW-Authenticate %q", path, code, h.Get("WWW-Authenticate"))
		}
		if code, _, _ := get(path, "ops", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong secret: HTTP %d", path, code)
		}
		if code, _, _ := get(path, "app", "app-secret-1"); code != http.StatusForbidden {
			t.Errorf("%s as a non-admin: HTTP %d", path, code)
		}
	}
	if code, _, body := get("/console/", "ops", "ops-secret-1"); code != http.StatusOK || !strings.Contains(body, "mqgate console") {
		t.Errorf("console page as admin: HTTP %d %q", code, body)
	}
	if code, _, body := get("/console/v1/topics", "ops", "ops-secret-1"); code != http.StatusOK || !strings.Contains(body, `"topics"`) {
		t.Errorf("REST through the console as admin: HTTP %d %q", code, body)
	}
	if code, _, body := get("/console/api/stats", "ops", "ops-secret-1"); code != http.StatusOK || !strings.Contains(body, `"put"`) {
		t.Errorf("stats as admin: HTTP %d %q", code, body)
	}
	// The REST API itself is unchanged: Basic credentials are no v2 signature.
	if code, _, _ := get("/v1/topics", "ops", "ops-secret-1"); code != http.StatusUnauthorized {
		t.Errorf("/v1/topics with Basic credentials: HTTP %d", code)
	}
}
