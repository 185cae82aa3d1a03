package lite

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

// The web console lists a LITE topic's lite topics with each group's
// backlog, in a real headless Chromium (as internal/e2e's console test).
func TestLiteConsole(t *testing.T) {
	begin(t)
	bin := testutil.Command(t, "the console test, which drives it headless", "Debian: apt-get install chromium",
		"chromium", "chromium-browser", "google-chrome")
	p := start(t, testutil.StartOptions{})
	parent, group := uniq("console-chat"), uniq("g")
	cli(t, p.GRPC, "topic", "create", parent, "--type", "LITE", "--queues", "2")
	cli(t, p.GRPC, "group", "create", group)
	pr := dial(t, p.GRPC, "producer")
	pr.mustSend(parent, "room-1", "m1", "m2")
	pr.mustSend(parent, "room-2", "n1")
	c := dial(t, p.GRPC, "lite")
	mq := c.queryRoute(parent)[0]
	c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	code(t, "subscribe", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "room-1"), v2.Code_OK)
	if got := c.receiveAll(group, mq, 2, 20*time.Second); len(got) != 2 {
		t.Fatalf("received %v", byLite(got))
	}

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	wait := func(what, expr string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
	}
	cellOf := func(lite, class string) string {
		return fmt.Sprintf(`((document.querySelector('#lite tr[data-lite=%q] td.%s')||{}).textContent||"")`, lite, class)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+p.HTTP+"/console/#/topics")); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`#topics tr[data-topic=%q] button.show-lite`, parent)
	wait("the LITE topic's button", `document.querySelector(`+strconv.Quote(row)+`) !== null`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	wait("the lite topic count", `document.querySelector('#lite-total').textContent === "2"`)
	wait("room-1's backlog", cellOf("room-1", "group")+` === `+strconv.Quote(group)+` && `+cellOf("room-1", "inflight")+` === "2" && `+cellOf("room-1", "kept")+` === "2"`)
	wait("room-2 with no group", cellOf("room-2", "group")+` === "-" && `+cellOf("room-2", "kept")+` === "1"`)
}
