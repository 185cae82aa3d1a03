package e2eutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mqgate/mqgate/internal/testutil"
)

// ChromiumBinary finds Chromium; without it the test is skipped, saying
// so (failed in CI, which installs it).
func ChromiumBinary(t testing.TB) string {
	t.Helper()
	return testutil.Command(t, "the console tests, which drive it headless", "Debian: apt-get install chromium",
		"chromium", "chromium-browser", "google-chrome")
}

// Browser starts one headless Chromium that reaches nothing but loopback,
// its window 1280 by 900.
func Browser(t testing.TB) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumBinary(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
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
	ctx, cancelC := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	return ctx
}

// WaitJS waits (polling the page, no fixed sleep) until expr is true.
func WaitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		banner, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#banner")))
		t.Fatalf("waiting for %s (%s): %v; the page's banner says %q", what, expr, err, banner)
	}
}

// JS evaluates expr in the page and returns its value.
func JS[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Do runs chromedp actions, failing the test on an error.
func Do(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// Go shows a console page (#/...) and waits for it to be the one shown.
func Go(t testing.TB, ctx context.Context, route, page string) {
	t.Helper()
	Do(t, ctx, chromedp.Evaluate[chromedp.Void]("location.hash = "+strconv.Quote(route)))
	WaitJS(t, ctx, "the "+page+" page", fmt.Sprintf(`document.querySelector('#page-%s').getClientRects().length > 0`, page))
}

// CellText is the JS expression of a table row's cell text ("" if absent).
func CellText(table, attr, name, class string) string {
	return fmt.Sprintf(`((document.querySelector('#%s tr[data-%s=%q] td.%s')||{}).textContent||"")`, table, attr, name, class)
}

// Screenshot saves the page as docs' console-NAME.png when
// MQGATE_TEST_CONSOLE_SCREENSHOTS names a directory (relative: to the
// repository's root; `docs` refreshes the documentation's).
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("MQGATE_TEST_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(testutil.RepoRoot(), dir)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
