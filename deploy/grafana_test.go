package deploy

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

// dashboardQueries returns every PromQL expression of the dashboard:
// panel targets and template variable queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(readFile(t, "grafana/mqgate.json"), &d); err != nil {
		t.Fatalf("grafana/mqgate.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, v.Definition)
		}
	}
	return out
}

var (
	reString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reRange      = regexp.MustCompile(`\[[^\]]*\]`)
	reMatchers   = regexp.MustCompile(`\{([^}]*)\}`)
	reGrouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	reLabelVals  = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	reIdent      = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reMatcherLbl = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	keywords     = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "offset": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true}
)

// promqlNames splits an expression into the metric names it selects and
// the label names it uses.
func promqlNames(expr string) (metrics, labels []string) {
	if m := reLabelVals.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}, []string{m[2]}
	}
	for _, m := range reMatchers.FindAllStringSubmatch(reString.ReplaceAllString(expr, `""`), -1) {
		for _, l := range reMatcherLbl.FindAllStringSubmatch(m[1], -1) {
			labels = append(labels, l[1])
		}
	}
	for _, g := range reGrouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	rest := reString.ReplaceAllString(expr, " ")
	rest = reMatchers.ReplaceAllString(rest, " ")
	rest = reRange.ReplaceAllString(rest, " ")
	rest = reGrouping.ReplaceAllString(rest, " ")
	for _, loc := range reIdent.FindAllStringIndex(rest, -1) {
		id := rest[loc[0]:loc[1]]
		after := strings.TrimLeft(rest[loc[1]:], " ")
		if keywords[id] || strings.HasPrefix(after, "(") || (loc[0] > 0 && rest[loc[0]-1] >= '0' && rest[loc[0]-1] <= '9') {
			continue // a function, keyword, or part of a number (1e-3)
		}
		metrics = append(metrics, id)
	}
	return metrics, labels
}

func TestPromQLNames(t *testing.T) {
	m, l := promqlNames(`histogram_quantile(0.99, sum by (le) (rate(rpc_server_call_duration_seconds_bucket{rpc_method="a/b",x=~"$y"}[$__rate_interval])))`)
	if strings.Join(m, ",") != "rpc_server_call_duration_seconds_bucket" || strings.Join(l, ",") != "rpc_method,x,le" {
		t.Fatalf("metrics %v labels %v", m, l)
	}
	m, l = promqlNames(`label_values(mqgate_consumer_backlog, messaging_consumer_group_name)`)
	if strings.Join(m, ",") != "mqgate_consumer_backlog" || strings.Join(l, ",") != "messaging_consumer_group_name" {
		t.Fatalf("metrics %v labels %v", m, l)
	}
	m, _ = promqlNames(`sum(mqgate_a) / sum(mqgate_b) > 1e-3`)
	if strings.Join(m, ",") != "mqgate_a,mqgate_b" {
		t.Fatalf("metrics %v", m)
	}
}

// Every metric and label the dashboard queries exists on a running
// mqgate's /metrics after traffic of every kind it charts: gRPC and REST
// sends, receives, acks, a redelivery and a dead-letter move.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	needBinary(t)
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true})
	base := "http://" + p.HTTP
	post := func(path, body string) string {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	post("/v1/topics", `{"name":"dash","type":"NORMAL","queues":2}`)
	post("/v1/groups", `{"name":"dashboards","maxDeliveryAttempts":2}`)
	if out, err := exec.Command(testutil.Binary(t), "send", "--server", p.GRPC, "--topic", "dash", "over gRPC").CombinedOutput(); err != nil {
		t.Fatalf("mqgate send: %v\n%s", err, out)
	}
	post("/v1/topics/dash/messages", `{"messages":[{"text":"over REST"}]}`)
	type recv struct {
		Messages []struct {
			ReceiptHandle   string
			DeliveryAttempt int
		}
	}
	receive := func() recv {
		var r recv
		if err := json.Unmarshal([]byte(post("/v1/groups/dashboards/topics/dash:receive", `{"maxMessages":1,"waitDuration":"2s"}`)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Ack one; take the other through two attempts to the DLQ.
	first := receive()
	if len(first.Messages) != 1 {
		t.Fatalf("receive: %+v", first)
	}
	post("/v1/groups/dashboards/topics/dash:ack", `{"receiptHandles":["`+first.Messages[0].ReceiptHandle+`"]}`)
	r := receive()
	for attempt := 1; len(r.Messages) == 1; attempt++ {
		if attempt > 3 {
			t.Fatal("the message never went to the dead-letter queue")
		}
		post("/v1/groups/dashboards/topics/dash:changeInvisibleDuration", `{"receiptHandle":"`+r.Messages[0].ReceiptHandle+`","invisibleDuration":"0s"}`)
		r = receive()
	}

	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + p.Metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, "mqgate_messages_dead_lettered_total") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	samples, labels := map[string]bool{}, map[string]bool{}
	reSample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s`)
	reLabel := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, l := range strings.Split(body, "\n") {
		m := reSample.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		samples[m[1]] = true
		for _, lm := range reLabel.FindAllStringSubmatch(m[3], -1) {
			labels[lm[1]] = true
		}
	}
	var missing []string
	queried := 0
	for _, q := range dashboardQueries(t) {
		ms, ls := promqlNames(q)
		if len(ms) == 0 {
			t.Errorf("query selects no metric: %s", q)
		}
		for _, m := range ms {
			queried++
			if !samples[m] {
				missing = append(missing, "metric "+m)
			}
		}
		for _, l := range ls {
			if !labels[l] {
				missing = append(missing, "label "+l)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the dashboard queries what /metrics does not have: %v", missing)
	}
	t.Logf("%d metric selections checked against /metrics", queried)
}
