package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// Authentication and permissions with the official Go client: with
// --auth-file, clients configured with a user's access and secret key
// produce and consume what that user may; a wrong secret, or a topic or
// group outside the user's lists, gets UNAUTHORIZED (40100) and changes
// nothing. The admin API (the CLI) needs an admin user.
func TestAuthWithOfficialClient(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
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
	p := start(t, testutil.StartOptions{Args: []string{"--auth-file", users}})
	topic, other, group, otherGroup := uniq("orders-"), uniq("payments-"), uniq("g-orders"), uniq("g-payments")

	// The admin API: unsigned and non-admin calls are refused.
	if out, err := cliResult(t, p, "topic", "create", topic); err == nil || !strings.Contains(out, "authentication required") {
		t.Fatalf("unsigned topic create: err %v, output %q", err, out)
	}
	if out, err := cliResult(t, p, "topic", "create", topic, "--access-key", "app", "--secret-key", "app-secret-1"); err == nil || !strings.Contains(out, "admin API") {
		t.Fatalf("non-admin topic create: err %v, output %q", err, out)
	}
	ops := []string{"--access-key", "ops", "--secret-key", "ops-secret-1"}
	for _, args := range [][]string{{"topic", "create", topic, "--queues", "2"}, {"topic", "create", other}, {"group", "create", group}, {"group", "create", otherGroup}} {
		cli(t, p, append(args, ops...)...)
	}

	as := func(group, ak, sk string) *rmq.Config {
		c := config(p, group)
		c.Credentials = &credentials.SessionCredentials{AccessKey: ak, AccessSecret: sk}
		return c
	}
	isUnauthorized := func(err error) bool {
		return err != nil && (rpcCode(err) == 40100 || strings.Contains(err.Error(), "UNAUTHORIZED"))
	}

	// A wrong secret: the producer cannot even start (its route query is
	// refused).
	bad, err := rmq.NewProducer(as("", "app", "wrong"), rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(); !isUnauthorized(err) {
		t.Fatalf("producer with a wrong secret started: %v", err)
	}

	pr := e2eutil.StartProducer(t, as("", "app", "app-secret-1"), rmq.WithTopics(topic))
	sent := map[string]string{}
	for i := 0; i < 5; i++ {
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("auth %d", i))}
		sent[send(t, pr, m).MessageID] = string(m.Body)
	}
	// Async sends are signed too.
	done := make(chan error, 1)
	pr.SendAsync(context.Background(), &rmq.Message{Topic: topic, Body: []byte("auth async")}, func(_ context.Context, rs []*rmq.SendReceipt, err error) {
		if err == nil {
			sent[rs[0].MessageID] = "auth async"
		}
		done <- err
	})
	if err := <-done; err != nil {
		t.Fatalf("async send: %v", err)
	}
	// A topic outside the user's publish list.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := pr.Send(ctx, &rmq.Message{Topic: other, Body: []byte("no")}); !isUnauthorized(err) {
		t.Fatalf("send to %s outside the publish list: %v", other, err)
	}

	// The consumer gets exactly what was sent.
	cons := e2eutil.StartSimpleConsumer(t, as(group, "app", "app-secret-1"), rmq.WithSimpleSubscriptionExpressions(all(topic)))
	got := collect(t, cons, len(sent), 30*time.Second, 60*time.Second, func(mv *rmq.MessageView) { ackMsg(t, cons, mv) })
	for _, mv := range got {
		if sent[mv.GetMessageId()] != string(mv.GetBody()) {
			t.Fatalf("received %s %q, not what was sent", mv.GetMessageId(), mv.GetBody())
		}
	}
	if len(got) != len(sent) {
		t.Fatalf("received %d messages, want %d", len(got), len(sent))
	}

	// A group outside the user's groups: refused at start or at receive.
	oc, err := rmq.NewSimpleConsumer(as(otherGroup, "app", "app-secret-1"), rmq.WithSimpleSubscriptionExpressions(all(topic)))
	if err != nil {
		t.Fatal(err)
	}
	if err := oc.Start(); err == nil {
		t.Cleanup(func() { _ = oc.GracefulStop() })
		rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer rcancel()
		if _, err := oc.Receive(rctx, 16, 30*time.Second); !isUnauthorized(err) {
			t.Fatalf("receive as %s outside the user's groups: %v", otherGroup, err)
		}
	} else if !isUnauthorized(err) {
		t.Fatalf("consumer of %s: %v", otherGroup, err)
	}

	// mqgate's own SDK (under the CLI) reports the server's refusal, not
	// just a closed stream.
	if out, err := cliResult(t, p, "send", "--topic", topic, "unsigned"); err == nil || !strings.Contains(out, "UNAUTHORIZED") || !strings.Contains(out, "no authorization header") {
		t.Fatalf("unsigned CLI send: err %v, output %q", err, out)
	}
	// Nothing reached the other topic: the admin finds no message there.
	if out := cli(t, p, append([]string{"receive", "--topic", other, "--group", otherGroup, "--wait", "1s"}, ops...)...); !strings.Contains(out, "no message for group") || strings.Contains(out, "message_id") {
		t.Fatalf("a refused send was stored: %s", out)
	}
}

// SIGHUP re-reads the users file: a rotated secret works at once and the
// old one stops working; a file that does not load keeps the users in
// place (and says so in the log).
func TestAuthReloadOnSIGHUP(t *testing.T) {
	e2e(t)
	users := filepath.Join(t.TempDir(), "users.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(users, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("users:\n  - {accessKey: ops, secretKey: old-secret, admin: true}\n")
	p := start(t, testutil.StartOptions{Args: []string{"--auth-file", users}})
	list := func(secret string) (string, error) {
		return cliResult(t, p, "topic", "list", "--access-key", "ops", "--secret-key", secret)
	}
	if out, err := list("old-secret"); err != nil {
		t.Fatalf("before the rotation: %v %s", err, out)
	}
	reloaded := func(msg string) {
		t.Helper()
		p.Signal(syscall.SIGHUP)
		if _, ok := p.WaitLog(10*time.Second, func(m map[string]any) bool { return m["msg"] == msg }); !ok {
			t.Fatalf("no %q in the log after SIGHUP", msg)
		}
	}
	write("users:\n  - {accessKey: ops, secretKey: new-secret, admin: true}\n")
	reloaded("SIGHUP: users file reloaded")
	if out, err := list("new-secret"); err != nil {
		t.Fatalf("the new secret: %v %s", err, out)
	}
	if out, err := list("old-secret"); err == nil || !strings.Contains(out, "wrong signature") {
		t.Fatalf("the old secret after the rotation: err %v, output %q", err, out)
	}
	write("users: [")
	reloaded("SIGHUP: users file not reloaded")
	if out, err := list("new-secret"); err != nil {
		t.Fatalf("after a bad file the users must stay: %v %s", err, out)
	}
}

// A users file other users can read is served, with a warning.
func TestAuthFileModeWarning(t *testing.T) {
	e2e(t)
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte("users:\n  - {accessKey: ops, secretKey: s, admin: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, testutil.StartOptions{Args: []string{"--auth-file", users}})
	if _, ok := p.WaitLog(10*time.Second, func(m map[string]any) bool {
		return m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["msg"]), "chmod 600") && m["mode"] == "-rw-r--r--"
	}); !ok {
		t.Fatal("no warning about a users file readable by others")
	}
}

// A users file that does not load stops the start with what is wrong.
func TestAuthBadFileRefusedAtStart(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(users, []byte("users:\n  - {accessKey: ops, secretKey: ''}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testutil.Binary(t), "serve", "--data-dir", filepath.Join(dir, "data"), "--auth-file", users,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--remoting-addr", "").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "auth-file") || !strings.Contains(string(out), "secretKey is empty") {
		t.Fatalf("serve with a bad users file: err %v, output %s", err, out)
	}
}
