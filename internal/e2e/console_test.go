package e2e

// The web console (/console on the HTTP port) in a real headless Chromium
// driven by chromedp, page by page: what it lists, plots, browses, finds,
// sends, creates, deletes and redrives, asserted through the page's DOM
// against a real mqgate; and its sign-in with auth on. With
// MQGATE_TEST_CONSOLE_SCREENSHOTS=docs the tests refresh the
// documentation's screenshots.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

var (
	waitJS     = e2eutil.WaitJS
	cellText   = e2eutil.CellText
	screenshot = e2eutil.Screenshot
	goTo       = e2eutil.Go
	do         = e2eutil.Do
)

// shown is the JS expression of whether the element sel is displayed
// (not only its hidden property: a style could override it).
func shown(sel string) string {
	return fmt.Sprintf(`(e => !!e && e.getClientRects().length > 0)(document.querySelector(%q))`, sel)
}

// msgOf is the JS expression of the text of a form's message.
func msgOf(form string) string {
	return fmt.Sprintf(`(document.querySelector('#%s .msg')||{}).textContent||""`, form)
}

func TestConsoleInBrowser(t *testing.T) {
	e2e(t)
	ctx := e2eutil.Browser(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("console-orders"), uniq("console-billing")
	dlqTopic, dlqGroup := uniq("console-payments"), uniq("console-strict")
	r.setup(topic, group) // 4 queues
	r.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"queues":1}`, dlqTopic))
	r.ok("POST", "/v1/groups", fmt.Sprintf(`{"name":%q,"maxDeliveryAttempts":1}`, dlqGroup))
	// A producer of the official Go client stays connected: the clients
	// page lists it.
	newProducer(t, p, topic)

	do(t, ctx, chromedp.Navigate("http://"+p.HTTP+"/console/"),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
	waitJS(t, ctx, "the overview", shown("#page-overview")+` && !`+shown("#signin")+` && !`+shown("#page-topics"))
	// The page signs as the REST API checks (docs/auth.md): its own
	// HMAC-SHA1 against Go's.
	if got, want := e2eutil.JS[string](t, ctx, `signature("ak", "a secret longer than the sixty-four bytes of a SHA-1 block, to be hashed first", "20240102T030405Z")`),
		v2Signature("ak", "a secret longer than the sixty-four bytes of a SHA-1 block, to be hashed first", "20240102T030405Z"); got != want {
		t.Fatalf("the page signs %q, want %q", got, want)
	}
	if got, want := e2eutil.JS[string](t, ctx, `signature("ops", "s", "20240102T030405Z")`), v2Signature("ops", "s", "20240102T030405Z"); got != want {
		t.Fatalf("the page signs %q, want %q", got, want)
	}
	waitJS(t, ctx, "a first rate sample", `Number(document.querySelector('#rates').dataset.points) >= 1`)

	// Send 6 messages (2 with a key, one JSON), receive 2 of them as group
	// without acking: backlog 6, 2 in flight.
	r.ok("POST", "/v1/topics/"+topic+"/messages",
		`{"messages":[{"text":"order one","keys":["order-1"]},{"text":"order two"},{"text":"order three"},{"text":"order four"},{"text":"order five"},{"text":"{\"id\":6,\"total\":12.5}","keys":["order-6"],"tag":"json","properties":{"region":"eu"}}]}`)
	var inFlight int
	for inFlight < 2 {
		got := r.receive(group, topic, "", fmt.Sprintf(`{"maxMessages":%d,"invisibleDuration":"60s","waitDuration":"5s"}`, 2-inFlight))
		inFlight += len(got)
	}
	waitJS(t, ctx, "the send rate plotted", `Number(document.querySelector('#rates').dataset.maxSend) > 0 && Number(document.querySelector('#rates').dataset.points) >= 2`)
	waitJS(t, ctx, "the backlog plotted", `document.querySelector('#backlog').dataset.last === "6"`)
	waitJS(t, ctx, "the tiles", `document.querySelector('#tile-backlog').textContent === "6" && Number(document.querySelector('#tile-stored').textContent) >= 6`)
	// The charts fill their box (no fixed width).
	if w := e2eutil.JS[int](t, ctx, `document.querySelector('#rates').width - Math.round(document.querySelector('#rates').clientWidth * devicePixelRatio)`); w != 0 {
		t.Fatalf("the rates chart's canvas is %d pixels off its box", w)
	}
	if os.Getenv("MQGATE_TEST_CONSOLE_SCREENSHOTS") != "" {
		// A fuller window of samples for the documentation.
		waitJS(t, ctx, "a dozen samples", `Number(document.querySelector('#rates').dataset.points) >= 12`)
	}
	screenshot(t, ctx, "overview")

	// Topics: counts, defaults, create (errors shown by the form), delete.
	goTo(t, ctx, "#/topics", "topics")
	waitJS(t, ctx, "the topic's stored count and backlog", cellText("topics", "topic", topic, "stored")+` === "6" && `+cellText("topics", "topic", topic, "backlog")+` === "6"`)
	if v := e2eutil.JS[string](t, ctx, `document.querySelector('#create-topic input[name=queues]').value`); v != "8" {
		t.Fatalf("the topic form's queues default to %q, want 8", v)
	}
	made := uniq("console-made")
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), made),
		chromedp.Click(chromedp.CSS(`#create-topic button[type=submit]`)))
	waitJS(t, ctx, "the created topic listed", cellText("topics", "topic", made, "name")+` === `+strconv.Quote(made))
	if got := r.ok("GET", "/v1/topics/"+made, ""); fmt.Sprint(got["topic"].(map[string]any)["queues"]) != "8" {
		t.Fatalf("created topic: %v", got)
	}
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), made),
		chromedp.Click(chromedp.CSS(`#create-topic button[type=submit]`)))
	waitJS(t, ctx, "the form saying the topic exists", `document.querySelector('#create-topic .msg').className === "msg error" && (`+msgOf("create-topic")+`).includes("already exists")`)
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#topics tr[data-topic=%q] button.delete`, made))))
	waitJS(t, ctx, "the deleted topic gone", fmt.Sprintf(`document.querySelector('#topics tr[data-topic=%q]') === null`, made))
	if code, _ := r.call("GET", "/v1/topics/"+made, ""); code != http.StatusNotFound {
		t.Fatalf("deleted topic: HTTP %d", code)
	}

	// A topic's page: its rate and stored counts over time, its queues,
	// the group's lag in each (4 never delivered: 6 stored, 2 in flight).
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#topics tr[data-topic=%q] td.name a`, topic))))
	waitJS(t, ctx, "the topic's page", shown("#page-topic")+` && document.querySelector('#topic-name').textContent === `+strconv.Quote(topic))
	waitJS(t, ctx, "its four queues", `document.querySelectorAll('#topic-queues tbody tr[data-queue]').length === 4`)
	waitJS(t, ctx, "the group's lag per queue", fmt.Sprintf(`[...document.querySelectorAll('#topic-lag tr[data-group=%q] td[data-lag]')].reduce((s, td) => s + Number(td.dataset.lag), 0) === 4`, group))
	waitJS(t, ctx, "the stored chart", `document.querySelector('#topic-stored').dataset.last === "6" && Number(document.querySelector('#topic-stored').dataset.points) >= 2`)
	screenshot(t, ctx, "topic")

	// Groups: counts, the form's defaults, dead letters and their redrive.
	goTo(t, ctx, "#/groups", "groups")
	waitJS(t, ctx, "the group's backlog and in flight", cellText("groups", "group", group, "backlog")+` === "6" && `+cellText("groups", "group", group, "inflight")+` === "2"`)
	// The server's default: the first delivery and upstream's 16 retries.
	if v := e2eutil.JS[string](t, ctx, `document.querySelector('#create-group input[name=maxDeliveryAttempts]').value`); v != "17" {
		t.Fatalf("the group form's max attempts default to %q, want 17", v)
	}
	madeGroup := uniq("console-made-group")
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#create-group input[name=name]`), madeGroup),
		chromedp.Click(chromedp.CSS(`#create-group button[type=submit]`)))
	waitJS(t, ctx, "the created group listed", cellText("groups", "group", madeGroup, "name")+` === `+strconv.Quote(madeGroup))
	if got := r.ok("GET", "/v1/groups/"+madeGroup, ""); fmt.Sprint(got["group"].(map[string]any)["maxDeliveryAttempts"]) != "17" {
		t.Fatalf("created group: %v", got)
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
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#groups tr[data-group=%q] button.show-dlq`, dlqGroup))))
	waitJS(t, ctx, "the dead letter listed", `[...document.querySelectorAll('#dlq td.body')].map(td => td.textContent).join("|") === "payment 42" && document.querySelector('#dlq td.origin').textContent === `+strconv.Quote(dlqTopic))
	screenshot(t, ctx, "deadletters")
	do(t, ctx, chromedp.Click(chromedp.CSS(`#dlq-redrive`)))
	waitJS(t, ctx, "the dead letter redriven", cellText("groups", "group", dlqGroup, "dlq")+` === "0" && document.querySelector('#dlq-pending').textContent === "0" && (document.querySelector('#dlq-msg').textContent).includes("redrove 1")`)
	again := r.receive(dlqGroup, dlqTopic, "?body=text", `{"maxMessages":1,"invisibleDuration":"10s","waitDuration":"10s"}`)
	if len(again) != 1 || again[0]["text"] != "payment 42" || again[0]["tag"] != "card" || fmt.Sprint(again[0]["deliveryAttempt"]) != "1" {
		t.Fatalf("redriven message received: %v", again)
	}
	r.ok("POST", "/v1/groups/"+dlqGroup+"/topics/"+dlqTopic+":ack", fmt.Sprintf(`{"receiptHandles":[%q]}`, again[0]["receiptHandle"]))

	// Messages: browse the queue holding order-6 from offset 0, open it,
	// read its body as JSON and as hex.
	found := list(r.ok("GET", "/v1/messages?key=order-6&topic="+topic, ""), "messages")
	if len(found) != 1 {
		t.Fatalf("lookup of order-6: %v", found)
	}
	queue, id := fmt.Sprint(found[0]["queueId"]), found[0]["messageId"].(string)
	goTo(t, ctx, "#/messages/"+topic+"/"+queue, "messages")
	waitJS(t, ctx, "the queue browsed", fmt.Sprintf(`document.querySelector('#browse-results tr[data-message-id=%q]') !== null`, id))
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#browse-results tr[data-message-id=%q]`, id))))
	waitJS(t, ctx, "the message shown", shown("#message-view")+` && document.querySelector('#mv-id').textContent === `+strconv.Quote(id)+
		` && document.querySelector('#mv-body').textContent === '{"id":6,"total":12.5}' && document.querySelector('#mv-props').textContent.includes("region")`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`.tabs button[data-view=json]`)))
	waitJS(t, ctx, "the body as JSON", `document.querySelector('#mv-body').textContent === '{\n  "id": 6,\n  "total": 12.5\n}'`)
	screenshot(t, ctx, "messages")
	do(t, ctx, chromedp.Click(chromedp.CSS(`.tabs button[data-view=hex]`)))
	waitJS(t, ctx, "the body in hex", `document.querySelector('#mv-body').textContent.startsWith("00000000  7b 22 69 64 22 3a 36 2c")`)
	// Paging: one message a page from offset 0 (a REST send puts its
	// batch in one queue).
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#browse select[name=queue]`), queue),
		chromedp.SetValue(chromedp.CSS(`#browse input[name=max]`), "1"),
		chromedp.SetValue(chromedp.CSS(`#browse input[name=offset]`), "0"),
		chromedp.Click(chromedp.CSS(`#browse button[type=submit]`)))
	waitJS(t, ctx, "the first page", `document.querySelectorAll('#browse-results tr[data-offset]').length === 1 && document.querySelector('#browse-results tr[data-offset]').dataset.offset === "0" && !document.querySelector('#browse-next').disabled`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`#browse-next`)))
	waitJS(t, ctx, "the next page", `document.querySelector('#browse-results tr[data-offset]').dataset.offset === "1" && !document.querySelector('#browse-prev').disabled`)
	// By store time: nothing stored an hour from now.
	later := time.Now().Add(time.Hour).Format("2006-01-02T15:04:05")
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#browse select[name=from]`), "time"),
		chromedp.Evaluate[chromedp.Void](`fromChanged(); document.querySelector('#browse input[name=time]').value = `+strconv.Quote(later)),
		chromedp.Click(chromedp.CSS(`#browse button[type=submit]`)))
	waitJS(t, ctx, "nothing after a later time", `document.querySelector('#browse-results td.empty') !== null && document.querySelector('#browse-range').textContent.includes("nothing from offset")`)
	// Lookup by key, as before.
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#lookup input[name=key]`), "order-6"),
		chromedp.Click(chromedp.CSS(`#lookup button[type=submit]`)))
	waitJS(t, ctx, "the lookup's body preview", `[...document.querySelectorAll('#lookup-results td.body')].map(td => td.textContent).join("|") === '{"id":6,"total":12.5}'`)
	// A lookup without id or key says so in the form.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#lookup input[name=key]').value = ""`),
		chromedp.Click(chromedp.CSS(`#lookup button[type=submit]`)))
	waitJS(t, ctx, "the lookup form's error", `(`+msgOf("lookup")+`).includes("message id or a key")`)
	// A test message.
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#send select[name=topic]`), topic),
		chromedp.SetValue(chromedp.CSS(`#send input[name=keys]`), "console-key"),
		chromedp.SetValue(chromedp.CSS(`#send input[name=text]`), "hello from the console"),
		chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	waitJS(t, ctx, "the test message sent", `(`+msgOf("send")+`).startsWith("sent ")`)
	if sent := list(r.ok("GET", "/v1/messages?key=console-key&topic="+topic, ""), "messages"); len(sent) != 1 {
		t.Fatalf("the console's test message: %v", sent)
	}

	// Clients: the Go producer, with its language and address.
	goTo(t, ctx, "#/clients", "clients")
	waitJS(t, ctx, "the producer listed", `[...document.querySelectorAll('#clients tbody tr')].some(tr => tr.querySelector('td.protocol')?.textContent === "grpc" && tr.querySelector('td.roles').textContent === "PRODUCER" && tr.querySelector('td.language').textContent.startsWith("GOLANG") && tr.querySelector('td.address').textContent.startsWith("127.0.0.1:") && tr.querySelector('td.topics').textContent === `+strconv.Quote(topic)+`)`)
	// (The clients screenshot is the cluster test's: clients of both
	// protocols.)

	// Cluster: a single node is one member and no raft group.
	goTo(t, ctx, "#/cluster", "cluster")
	waitJS(t, ctx, "the single member", `document.querySelectorAll('#members tbody tr[data-member]').length === 1 && document.querySelector('#members td.role').textContent.startsWith("STANDALONE") && document.querySelector('#members td.health').textContent === "UP" && document.querySelector('#raft-groups').textContent.includes("single node")`)
}

// startWithConsoleUsers starts mqgate with auth on (consoleUsers), and
// any more flags.
func startWithConsoleUsers(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	return start(t, testutil.StartOptions{Args: append([]string{"--auth-file", consoleUsers(t)}, args...)})
}

// consoleUsers writes a users file: "ops" an admin, "app" limited to
// orders-* topics and g-orders* groups.
func consoleUsers(t *testing.T) string {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(`users:
  - accessKey: app
    secretKey: app-secret-1
    publish: ["orders-*"]
    subscribe: ["orders-*"]
    groups: ["g-orders*"]
  - accessKey: ops
    secretKey: ops-secret-1
    admin: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return users
}

// With auth on, the console asks for credentials, signs its calls with
// them, shows a user what that user may see and hides the admin actions
// from users who are not admins.
func TestConsoleSignInInBrowser(t *testing.T) {
	e2e(t)
	ctx := e2eutil.Browser(t)
	p := startWithConsoleUsers(t)
	ops := newREST(t, p).as("ops", "ops-secret-1")
	mine, theirs := uniq("orders-console"), uniq("payments-console")
	myGroup, theirGroup := uniq("g-orders-console"), uniq("g-payments-console")
	for _, n := range []string{mine, theirs} {
		ops.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"queues":2}`, n))
	}
	for _, n := range []string{myGroup, theirGroup} {
		ops.ok("POST", "/v1/groups", fmt.Sprintf(`{"name":%q}`, n))
	}
	// The pages need no credentials; the data does.
	if code, _ := newREST(t, p).call("GET", "/v1/topics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/v1/topics without credentials: HTTP %d", code)
	}

	do(t, ctx, chromedp.Navigate("http://"+p.HTTP+"/console/"))
	waitJS(t, ctx, "the sign-in form", shown("#signin")+` && !`+shown("#nav"))
	screenshot(t, ctx, "signin")
	signIn := func(ak, sk string) {
		t.Helper()
		do(t, ctx, chromedp.SetValue(chromedp.CSS(`#signin input[name=accessKey]`), ak),
			chromedp.SetValue(chromedp.CSS(`#signin input[name=secretKey]`), sk),
			chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)))
	}
	signIn("app", "wrong")
	waitJS(t, ctx, "the refusal in the form", `(`+msgOf("signin")+`).includes("Refused") && `+shown("#signin"))

	// app: its topics and groups only, no admin action, no admin page.
	signIn("app", "app-secret-1")
	waitJS(t, ctx, "app signed in", `document.querySelector('#who').textContent === "app" && `+shown("#nav"))
	if hidden := e2eutil.JS[bool](t, ctx, `!`+shown("#nav a[data-page=clients]")+` && !`+shown("#nav a[data-page=cluster]")+` && `+shown("#nav a[data-page=topics]")); !hidden {
		t.Fatal("the admin pages are in a non-admin's navigation")
	}
	goTo(t, ctx, "#/topics", "topics")
	waitJS(t, ctx, "app's topic listed", cellText("topics", "topic", mine, "name")+` === `+strconv.Quote(mine))
	if n := e2eutil.JS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll('#topics tr[data-topic=%q]').length + document.querySelectorAll('#topics button.delete').length + (`+shown("#create-topic")+` ? 1 : 0)`, theirs)); n != 0 {
		t.Fatalf("app sees another's topic, a delete button or the create form (%d)", n)
	}
	goTo(t, ctx, "#/groups", "groups")
	waitJS(t, ctx, "app's group listed", cellText("groups", "group", myGroup, "name")+` === `+strconv.Quote(myGroup))
	// Its dead letters, without the redrive.
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#groups tr[data-group=%q] button.show-dlq`, myGroup))))
	waitJS(t, ctx, "app's dead letters, no redrive", shown("#dlq-section")+` && document.querySelector('#dlq-pending').textContent === "0" && !`+shown("#dlq-redrive"))
	if n := e2eutil.JS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll('#groups tr[data-group=%q]').length + document.querySelectorAll('#groups button.delete').length + (`+shown("#create-group")+` ? 1 : 0)`, theirGroup)); n != 0 {
		t.Fatalf("app sees another's group, a delete button, the create form or redrive (%d)", n)
	}
	// Its own credentials sign the sends it makes.
	goTo(t, ctx, "#/messages", "messages")
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#send select[name=topic]`), mine),
		chromedp.SetValue(chromedp.CSS(`#send input[name=text]`), "signed by app"),
		chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	waitJS(t, ctx, "app's send", `(`+msgOf("send")+`).startsWith("sent ")`)

	// Sign out, then in as ops: everything, and the admin actions work.
	do(t, ctx, chromedp.Click(chromedp.CSS(`#signout`)))
	waitJS(t, ctx, "signed out", shown("#signin")+` && !`+shown("#nav")+` && !`+shown("#page-groups")+` && document.querySelector('#who').textContent === ""`)
	signIn("ops", "ops-secret-1")
	waitJS(t, ctx, "ops signed in", `document.querySelector('#who').textContent === "ops (admin)" && `+shown("#nav a[data-page=clients]"))
	goTo(t, ctx, "#/topics", "topics")
	waitJS(t, ctx, "every topic listed", cellText("topics", "topic", theirs, "name")+` === `+strconv.Quote(theirs))
	secured := uniq("console-secured")
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), secured),
		chromedp.Click(chromedp.CSS(`#create-topic button[type=submit]`)))
	waitJS(t, ctx, "the topic created with auth on", cellText("topics", "topic", secured, "name")+` === `+strconv.Quote(secured))
	goTo(t, ctx, "#/cluster", "cluster")
	waitJS(t, ctx, "the cluster page for ops", `document.querySelector('#members td.role') !== null`)
}
