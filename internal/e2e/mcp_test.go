package e2e

// The MCP server, driven by the official Go SDK's own client over both
// transports: `mqgate mcp` on stdio (a desktop assistant's setup), and
// the streamable HTTP endpoint of `mqgate serve --mcp`, signed as the
// REST API is when auth is on.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mqgate/mqgate/internal/testutil"
)

// mcpCall calls a tool and decodes its structured answer into out; it
// fails the test when the tool answers an error.
func mcpCall(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res := mcpTry(t, s, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: %s", tool, args, mcpText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, b)
	}
}

func mcpTry(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var mcpTools = []string{"cluster_status", "describe_group", "describe_topic", "diagnose_group", "find_message", "list_groups", "list_topics", "topic_route"}

func TestMCPOverStdio(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("mcp-orders"), uniq("mcp-billing")
	r.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"queues":2}`, topic))
	r.ok("POST", "/v1/groups", fmt.Sprintf(`{"name":%q,"maxDeliveryAttempts":3}`, group))
	r.ok("POST", "/v1/topics/"+topic+"/messages", `{"messages":[{"text":"poison pill","keys":["mcp-key"]},{"text":"two"},{"text":"three"}]}`)
	// One message delivered twice and never acknowledged: the group is
	// stuck on it.
	got := r.receive(group, topic, "?body=text", `{"maxMessages":1,"invisibleDuration":"10s","waitDuration":"5s"}`)
	if len(got) != 1 {
		t.Fatalf("receive: %v", got)
	}
	r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":changeInvisibleDuration",
		fmt.Sprintf(`{"receiptHandle":%q,"invisibleDuration":"0s"}`, got[0]["receiptHandle"]))
	again := r.receive(group, topic, "?body=text", `{"maxMessages":1,"invisibleDuration":"60s","waitDuration":"5s"}`)
	if len(again) != 1 || again[0]["messageId"] != got[0]["messageId"] {
		t.Fatalf("redelivery: %v", again)
	}
	stuckID := got[0]["messageId"].(string)

	// Off by default on the HTTP listener.
	if resp, err := http.Post("http://"+p.HTTP+"/mcp", "application/json", strings.NewReader(`{}`)); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/mcp without --mcp: HTTP %d", resp.StatusCode)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "mqgate-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(testutil.Binary(t), "mcp", "--server", p.GRPC)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if info := s.InitializeResult().ServerInfo; info.Name != "mqgate" {
		t.Fatalf("server info: %+v", info)
	}
	tl, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s is not marked read-only", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools %v, want %v", names, mcpTools)
	}

	var topics struct {
		Topics []struct {
			Name    string `json:"name"`
			Stored  int64  `json:"stored"`
			Sent    int64  `json:"sent"`
			Backlog int64  `json:"backlog"`
		} `json:"topics"`
	}
	mcpCall(t, s, "list_topics", nil, &topics)
	if i := slices.IndexFunc(topics.Topics, func(x struct {
		Name    string `json:"name"`
		Stored  int64  `json:"stored"`
		Sent    int64  `json:"sent"`
		Backlog int64  `json:"backlog"`
	}) bool {
		return x.Name == topic
	}); i < 0 || topics.Topics[i].Stored != 3 || topics.Topics[i].Sent != 3 || topics.Topics[i].Backlog != 3 {
		t.Fatalf("list_topics: %+v", topics)
	}
	var td struct {
		Stored int64 `json:"stored"`
		Queues []struct {
			Messages int64 `json:"messages"`
		} `json:"queues"`
		Groups []struct {
			Group    string `json:"group"`
			InFlight int64  `json:"in_flight"`
			Ready    int64  `json:"ready"`
		} `json:"groups"`
		RateWindow float64 `json:"rate_window_seconds"`
	}
	mcpCall(t, s, "describe_topic", map[string]any{"topic": topic}, &td)
	if td.Stored != 3 || len(td.Queues) != 2 || len(td.Groups) != 1 || td.Groups[0].Group != group || td.Groups[0].InFlight != 1 || td.Groups[0].Ready != 2 || td.RateWindow <= 0 {
		t.Fatalf("describe_topic: %+v", td)
	}
	var groups struct {
		Groups []struct {
			Name     string `json:"name"`
			Backlog  int64  `json:"backlog"`
			InFlight int64  `json:"in_flight"`
		} `json:"groups"`
	}
	mcpCall(t, s, "list_groups", nil, &groups)
	if !slices.ContainsFunc(groups.Groups, func(g struct {
		Name     string `json:"name"`
		Backlog  int64  `json:"backlog"`
		InFlight int64  `json:"in_flight"`
	}) bool {
		return g.Name == group && g.Backlog == 3 && g.InFlight == 1
	}) {
		t.Fatalf("list_groups: %+v", groups)
	}
	var gd struct {
		MaxDeliveryAttempts int32 `json:"max_delivery_attempts"`
		Topics              []struct {
			Topic   string `json:"topic"`
			Backlog int64  `json:"backlog"`
		} `json:"topics"`
	}
	mcpCall(t, s, "describe_group", map[string]any{"group": group}, &gd)
	if gd.MaxDeliveryAttempts != 3 || len(gd.Topics) != 1 || gd.Topics[0].Topic != topic || gd.Topics[0].Backlog != 3 {
		t.Fatalf("describe_group: %+v", gd)
	}
	var route struct {
		Type      string   `json:"type"`
		Queues    []any    `json:"queues"`
		Endpoints []string `json:"endpoints"`
	}
	mcpCall(t, s, "topic_route", map[string]any{"topic": topic}, &route)
	if route.Type != "NORMAL" || len(route.Queues) != 2 || len(route.Endpoints) != 1 || route.Endpoints[0] != p.GRPC {
		t.Fatalf("topic_route: %+v (gRPC at %s)", route, p.GRPC)
	}
	var found struct {
		Messages []struct {
			MessageID string `json:"message_id"`
			Body      string `json:"body"`
		} `json:"messages"`
	}
	mcpCall(t, s, "find_message", map[string]any{"key": "mcp-key"}, &found)
	if len(found.Messages) != 1 || found.Messages[0].MessageID != stuckID || found.Messages[0].Body != "poison pill" {
		t.Fatalf("find_message: %+v", found)
	}
	var diag struct {
		Topics []struct {
			OldestInFlight *struct {
				MessageID     string `json:"message_id"`
				Deliveries    int32  `json:"deliveries"`
				MaxDeliveries int32  `json:"max_deliveries"`
			} `json:"oldest_in_flight"`
		} `json:"topics"`
		Consumers []any    `json:"connected_consumers"`
		Findings  []string `json:"findings"`
	}
	mcpCall(t, s, "diagnose_group", map[string]any{"group": group}, &diag)
	if len(diag.Topics) != 1 || diag.Topics[0].OldestInFlight == nil || diag.Topics[0].OldestInFlight.MessageID != stuckID ||
		diag.Topics[0].OldestInFlight.Deliveries != 2 || diag.Topics[0].OldestInFlight.MaxDeliveries != 3 {
		t.Fatalf("diagnose_group: %+v", diag)
	}
	text := strings.Join(diag.Findings, "\n")
	if !strings.Contains(text, "No consumer of group") || !strings.Contains(text, "delivered 2 times (of at most 3)") {
		t.Fatalf("diagnose_group's findings: %s", text)
	}
	var cl struct {
		Clustered bool `json:"clustered"`
		Members   []struct {
			Role string `json:"role"`
		} `json:"members"`
	}
	mcpCall(t, s, "cluster_status", nil, &cl)
	if cl.Clustered || len(cl.Members) != 1 || cl.Members[0].Role != "STANDALONE" {
		t.Fatalf("cluster_status: %+v", cl)
	}
	// A bad argument is the tool's error, naming the problem.
	if res := mcpTry(t, s, "describe_topic", map[string]any{"topic": "nope"}); !res.IsError || !strings.Contains(mcpText(res), `"nope"`) {
		t.Fatalf("describe_topic of no topic: %+v %s", res, mcpText(res))
	}
	// Nothing changed: still 3 stored, 1 in flight.
	mcpCall(t, s, "describe_topic", map[string]any{"topic": topic}, &td)
	if td.Stored != 3 || td.Groups[0].InFlight != 1 {
		t.Fatalf("after the tools: %+v", td)
	}
}

// signingTransport signs every HTTP request as the REST API expects.
type signingTransport struct {
	ak, sk string
	base   http.RoundTripper
}

func (s signingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	date := time.Now().UTC().Format("20060102T150405Z")
	r.Header.Set("X-Mq-Date-Time", date)
	r.Header.Set("Authorization", v2Signature(s.ak, s.sk, date))
	return s.base.RoundTrip(r)
}

func TestMCPOverHTTP(t *testing.T) {
	e2e(t)
	p := startWithConsoleUsers(t, "--mcp") // ops: admin; app: orders-* and g-orders* only

	ops := newREST(t, p).as("ops", "ops-secret-1")
	mine, theirs := uniq("orders-mcp"), uniq("payments-mcp")
	for _, n := range []string{mine, theirs} {
		ops.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"queues":1}`, n))
	}
	connect := func(ak, sk string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: http.DefaultTransport}
		if ak != "" {
			hc.Transport = signingTransport{ak: ak, sk: sk, base: http.DefaultTransport}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "mqgate-e2e", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + p.HTTP + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	}
	if s, err := connect("", ""); err == nil {
		s.Close()
		t.Fatal("an unsigned MCP client connected")
	}
	if s, err := connect("app", "wrong"); err == nil {
		s.Close()
		t.Fatal("an MCP client with a wrong secret connected")
	}
	app, err := connect("app", "app-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	var topics struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	mcpCall(t, app, "list_topics", nil, &topics)
	var names []string
	for _, x := range topics.Topics {
		names = append(names, x.Name)
	}
	if !slices.Contains(names, mine) || slices.Contains(names, theirs) {
		t.Fatalf("app's topics over MCP: %v", names)
	}
	// What app may not see is refused, with the admin API's reason.
	if res := mcpTry(t, app, "describe_topic", map[string]any{"topic": theirs}); !res.IsError || !strings.Contains(mcpText(res), "may neither publish to nor consume") {
		t.Fatalf("app describing another's topic: %s", mcpText(res))
	}
	if res := mcpTry(t, app, "cluster_status", nil); !res.IsError || !strings.Contains(mcpText(res), "admin API") {
		t.Fatalf("app's cluster status: %s", mcpText(res))
	}
	opsSession, err := connect("ops", "ops-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	defer opsSession.Close()
	var cl struct {
		Members []struct {
			Role string `json:"role"`
		} `json:"members"`
	}
	mcpCall(t, opsSession, "cluster_status", nil, &cl)
	if len(cl.Members) != 1 || cl.Members[0].Role != "STANDALONE" {
		t.Fatalf("ops's cluster status: %+v", cl)
	}
	mcpCall(t, opsSession, "list_topics", nil, &topics)
	if len(topics.Topics) < 2 {
		t.Fatalf("ops's topics: %+v", topics)
	}
}

// The desktop assistant's configuration in docs/operations.md works as
// written (the binary's path and the server's address aside): the SDK's
// client starts the command it names, with its arguments and
// environment, against a server with auth on.
func TestMCPDesktopConfigInDocs(t *testing.T) {
	e2e(t)
	doc, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### A desktop assistant")
	_, block, ok2 := strings.Cut(section, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/operations.md has no JSON block under \"### A desktop assistant\"")
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatalf("the documented configuration: %v\n%s", err, block)
	}
	srv, ok := cfg.MCPServers["mqgate"]
	if !ok || srv.Command != "mqgate" {
		t.Fatalf("the documented configuration: %+v", cfg)
	}
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(fmt.Sprintf("users:\n  - {accessKey: %s, secretKey: %s, admin: true}\n",
		srv.Env["MQGATE_ACCESS_KEY"], srv.Env["MQGATE_SECRET_KEY"])), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, testutil.StartOptions{Args: []string{"--auth-file", users}})
	args := slices.Clone(srv.Args)
	i := slices.Index(args, "--server")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("the documented arguments name no --server: %v", args)
	}
	args[i+1] = p.GRPC
	cmd := exec.Command(testutil.Binary(t), args...)
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var cl struct {
		Members []struct {
			Role string `json:"role"`
		} `json:"members"`
	}
	mcpCall(t, s, "cluster_status", nil, &cl)
	if len(cl.Members) != 1 || cl.Members[0].Role != "STANDALONE" {
		t.Fatalf("cluster_status with the documented configuration: %+v", cl)
	}
}
