package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/mqerr"
)

const usersYAML = `
users:
  - accessKey: app
    secretKey: app-secret
    publish: ["orders", "audit-*"]
    subscribe: ["orders"]
    groups: ["g-*"]
  - accessKey: ops
    secretKey: ops-secret
    admin: true
  - accessKey: reader
    secretKey: reader-secret
    publish: []
  - accessKey: open
    secretKey: open-secret
  - accessKey: gone
    secretKey: gone-secret
    disabled: true
`

func testAuth(t *testing.T) (*Authenticator, time.Time) {
	t.Helper()
	us, err := Parse([]byte(usersYAML))
	if err != nil {
		t.Fatal(err)
	}
	a := New(us)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	return a, now
}

// goHeader is what the official Go client v5.1.3 sends.
func goHeader(ak, sk, date string) string {
	h := hmac.New(sha1.New, []byte(sk))
	h.Write([]byte(date))
	return fmt.Sprintf("MQv2-HMAC-SHA1 Credential=%s//Rocketmq, SignedHeaders=x-mq-date-time, Signature=%s", ak, hex.EncodeToString(h.Sum(nil)))
}

func TestV2(t *testing.T) {
	a, now := testAuth(t)
	date := now.Format(DateTimeLayout)
	javaStyle := strings.Replace(strings.ToUpper(goHeader("app", "app-secret", date)), "MQV2-HMAC-SHA1 CREDENTIAL=APP//ROCKETMQ", "MQv2-HMAC-SHA1 Credential=app", 1)
	javaStyle = strings.NewReplacer("SIGNEDHEADERS=X-MQ-DATE-TIME", "SignedHeaders=x-mq-date-time", "SIGNATURE=", "Signature=").Replace(javaStyle)
	ok := []struct{ name, header, date string }{
		{"go client", goHeader("app", "app-secret", date), date},
		{"java client, upper-case hex, bare access key", javaStyle, date},
		{"clock 14h ahead (local time written with a Z)", goHeader("app", "app-secret", now.Add(14*time.Hour).Format(DateTimeLayout)), now.Add(14 * time.Hour).Format(DateTimeLayout)},
	}
	for _, c := range ok {
		u, err := a.V2(c.header, c.date)
		if err != nil || u.AccessKey != "app" {
			t.Errorf("%s: %q: user %v, err %v", c.name, c.header, u, err)
		}
	}
	bad := []struct{ name, header, date, want string }{
		{"no header", "", date, "no authorization header"},
		{"empty credentials (Go client without credentials)", goHeader("", "", date), date, "names no access key"},
		{"wrong secret", goHeader("app", "other", date), date, "wrong signature"},
		{"unknown access key", goHeader("nobody", "app-secret", date), date, "unknown access key"},
		{"signature over another time", goHeader("app", "app-secret", date), now.Add(time.Second).Format(DateTimeLayout), "wrong signature"},
		{"no date header", goHeader("app", "app-secret", date), "", "x-mq-date-time header is missing"},
		{"bad date", goHeader("app", "app-secret", "yesterday"), "yesterday", "is not yyyyMMddTHHmmssZ"},
		{"stale date", goHeader("app", "app-secret", now.Add(-26*time.Hour).Format(DateTimeLayout)), now.Add(-26 * time.Hour).Format(DateTimeLayout), "from the server's clock"},
		{"other algorithm", strings.Replace(goHeader("app", "app-secret", date), "MQv2-HMAC-SHA1", "HMAC-SHA256", 1), date, "unsupported algorithm"},
		{"other signed headers", strings.Replace(goHeader("app", "app-secret", date), "SignedHeaders=x-mq-date-time", "SignedHeaders=host", 1), date, "SignedHeaders"},
		{"signature not hex", "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=zz", date, "wrong signature"},
		{"disabled user", goHeader("gone", "gone-secret", date), date, `"gone" is disabled`},
	}
	for _, c := range bad {
		u, err := a.V2(c.header, c.date)
		if err == nil || u != nil {
			t.Errorf("%s: accepted as %v", c.name, u)
			continue
		}
		if mqerr.KindOf(err) != mqerr.KindUnauthorized || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v (kind %v), want UNAUTHORIZED mentioning %q", c.name, err, mqerr.KindOf(err), c.want)
		}
	}
}

// sign is what rocketmq-client-go v2.1.2's ACL interceptor does.
func sign(ext map[string]string, body []byte, ak, sk string) map[string]string {
	out := map[string]string{"AccessKey": ak}
	for k, v := range ext {
		out[k] = v
	}
	out["Signature"] = RemotingSign(out, body, sk)
	return out
}

func TestRemoting(t *testing.T) {
	a, _ := testAuth(t)
	ext := map[string]string{"topic": "orders", "a": "producer-group", "queueId": "3"}
	body := []byte("hello")
	// The content is the values in key order, then the body.
	if got := string(remotingContent(sign(ext, body, "app", "x"), body)); got != "appproducer-group3ordershello" {
		t.Fatalf("content %q", got)
	}
	if u, err := a.Remoting(sign(ext, body, "app", "app-secret"), body); err != nil || u.AccessKey != "app" {
		t.Fatalf("good signature: %v %v", u, err)
	}
	tampered := sign(ext, body, "app", "app-secret")
	tampered["topic"] = "audit-x"
	for name, c := range map[string]struct {
		ext  map[string]string
		body []byte
	}{
		"unsigned":       {ext, body},
		"wrong secret":   {sign(ext, body, "app", "nope"), body},
		"unknown key":    {sign(ext, body, "nobody", "app-secret"), body},
		"field changed":  {tampered, body},
		"body changed":   {sign(ext, body, "app", "app-secret"), []byte("hellO")},
		"signature junk": {map[string]string{"AccessKey": "app", "Signature": "%%%"}, nil},
		"disabled user":  {sign(ext, body, "gone", "gone-secret"), body},
	} {
		if u, err := a.Remoting(c.ext, c.body); err == nil || mqerr.KindOf(err) != mqerr.KindUnauthorized {
			t.Errorf("%s: user %v err %v", name, u, err)
		}
	}
}

func TestAllow(t *testing.T) {
	a, _ := testAuth(t)
	users := a.users.Load()
	cases := []struct {
		user string
		acc  Access
		ok   bool
	}{
		{"app", Access{Publish: "orders"}, true},
		{"app", Access{Publish: "audit-2026"}, true},
		{"app", Access{Publish: "audit"}, false},
		{"app", Access{Publish: "payments"}, false},
		{"app", Access{Subscribe: "orders", Group: "g-billing"}, true},
		{"app", Access{Subscribe: "orders", Group: "billing"}, false},
		{"app", Access{Subscribe: "audit-1", Group: "g-1"}, false},
		{"app", Access{Subscribe: "%RETRY%g-1"}, true}, // a group's own retry and DLQ topics
		{"app", Access{Subscribe: "%DLQ%g-1"}, true},
		{"app", Access{Subscribe: "%DLQ%other"}, false},
		{"app", Access{Route: "orders"}, true},
		{"app", Access{Route: "audit-x"}, true}, // publish only
		{"app", Access{Route: "payments"}, false},
		{"app", Access{Admin: true}, false},
		{"ops", Access{Admin: true, Publish: "x", Subscribe: "y", Group: "z"}, true},
		{"reader", Access{Publish: "orders"}, false}, // [] allows nothing
		{"reader", Access{Subscribe: "orders", Group: "any"}, true},
		{"open", Access{Publish: "anything", Subscribe: "else", Group: "g"}, true},
		{"open", Access{Admin: true}, false},
		// A record named by its offset: its own topic is checked.
		{"app", Access{Record: &Record{Offset: 7, Topic: "orders"}}, true},
		{"app", Access{Record: &Record{Offset: 7, Topic: "%RETRY%g-1"}}, true},
		{"app", Access{Record: &Record{Offset: 7, Topic: "payments"}}, false},
		{"app", Access{Record: &Record{Offset: 7}}, false}, // no message there
		{"open", Access{Record: &Record{Offset: 7, Topic: "anything"}}, true},
		{"open", Access{Record: &Record{Offset: 7, Topic: "rmq_sys_journal"}}, false}, // staged, not a message of a topic
		{"open", Access{Record: &Record{Offset: 7, Topic: "RMQ_SYS_TRANS_HALF_TOPIC"}}, false},
		{"ops", Access{Record: &Record{Offset: 7, Topic: "rmq_sys_journal"}}, true},
		{"ops", Access{Record: &Record{Offset: 7}}, true},
	}
	for _, c := range cases {
		ctx := NewContext(context.Background(), users.get(c.user))
		err := a.Allow(ctx, c.acc)
		if (err == nil) != c.ok {
			t.Errorf("%s %+v: err %v, want allowed %v", c.user, c.acc, err, c.ok)
		}
		if err != nil && mqerr.KindOf(err) != mqerr.KindUnauthorized {
			t.Errorf("%s %+v: kind %v", c.user, c.acc, mqerr.KindOf(err))
		}
	}
	// The refusals for a record say the same whatever the offset holds.
	app := NewContext(context.Background(), users.get("app"))
	e1 := a.Allow(app, Access{Record: &Record{Offset: 7, Topic: "payments"}})
	e2 := a.Allow(app, Access{Record: &Record{Offset: 7}})
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() || strings.Contains(e1.Error(), "payments") {
		t.Errorf("record refusals differ or name the topic: %v / %v", e1, e2)
	}
	// Enabled without a user fails closed; disabled allows everything.
	if err := a.Allow(context.Background(), Access{Publish: "orders"}); err == nil {
		t.Error("no user in the context was allowed")
	}
	var off *Authenticator
	if err := off.Allow(context.Background(), Access{Admin: true}); err != nil {
		t.Errorf("auth off: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"no users":       {"users: []", "no users"},
		"unknown key":    {"users:\n  - accessKey: a\n    secretKey: b\n    admn: true", "admn"},
		"empty secret":   {"users:\n  - accessKey: a\n    secretKey: ''", "secretKey is empty"},
		"empty key":      {"users:\n  - secretKey: b", "accessKey is empty"},
		"key with slash": {"users:\n  - accessKey: a/b\n    secretKey: b", "must not contain"},
		"duplicate":      {"users:\n  - accessKey: a\n    secretKey: b\n  - accessKey: a\n    secretKey: c", "appears twice"},
		"bad pattern":    {"users:\n  - accessKey: a\n    secretKey: b\n    publish: ['a*b']", "may only end"},
		"not yaml":       {"users: [", "decode"},
	} {
		if _, err := Parse([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
	if _, err := Load("/nonexistent/users.yaml"); err == nil {
		t.Error("missing file loaded")
	}
}

// FuzzV2 feeds arbitrary headers to the verifier: it must never panic and
// never accept a header that does not carry the right signature.
func FuzzV2(f *testing.F) {
	date := "20261201T100000Z"
	f.Add(goHeader("app", "app-secret", date), date)
	f.Add("MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=00", date)
	f.Add("MQv2-HMAC-SHA1 ,,,==", "")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, header, date string) {
		us, _ := Parse([]byte(usersYAML))
		a := New(us)
		a.now = func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) }
		u, err := a.V2(header, date)
		if err != nil {
			return
		}
		if !strings.Contains(strings.ToLower(header), strings.ToLower(hex.EncodeToString(mac(u.secretKey, []byte(date))))) {
			t.Fatalf("accepted %q / %q as %s without its signature", header, date, u.AccessKey)
		}
	})
}

func BenchmarkV2(b *testing.B) {
	us, _ := Parse([]byte(usersYAML))
	a := New(us)
	date := time.Now().UTC().Format(DateTimeLayout)
	h := goHeader("app", "app-secret", date)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.V2(h, date); err != nil {
			b.Fatal(err)
		}
	}
}

// A verified header is remembered, but never past a users reload or the
// date window.
func TestV2Remembered(t *testing.T) {
	a, now := testAuth(t)
	date := now.Format(DateTimeLayout)
	h := goHeader("app", "app-secret", date)
	for i := 0; i < 2; i++ {
		if _, err := a.V2(h, date); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := a.V2(h, now.Add(time.Second).Format(DateTimeLayout)); err == nil {
		t.Fatal("a remembered header was accepted with another date")
	}
	later := now.Add(DefaultMaxSkew + time.Second)
	a.now = func() time.Time { return later }
	if _, err := a.V2(h, date); err == nil {
		t.Fatal("a remembered header was accepted past the date window")
	}
	a.now = func() time.Time { return now }
	if _, err := a.V2(h, date); err != nil {
		t.Fatal(err)
	}
	rotated, err := Parse([]byte("users:\n  - {accessKey: app, secretKey: rotated}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a.SetUsers(rotated)
	if _, err := a.V2(h, date); err == nil {
		t.Fatal("a header signed with the old secret was accepted after the reload")
	}
}

// FuzzParse feeds arbitrary users files to the parser (they come from
// disk): it must never panic, and what it accepts must be usable: every
// user has an access key the header grammar can carry, a secret, and
// well-formed patterns.
func FuzzParse(f *testing.F) {
	f.Add([]byte(usersYAML))
	f.Add([]byte("users:\n  - {accessKey: a, secretKey: b, publish: ['x*'], groups: []}\n"))
	f.Add([]byte("users: [{accessKey: a, secretKey: b}, {accessKey: a, secretKey: c}]"))
	f.Add([]byte("users:\n  - accessKey: 'a b'\n    secretKey: s\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		us, err := Parse(b)
		if err != nil {
			return
		}
		if us.Len() == 0 {
			t.Fatal("accepted a file with no users")
		}
		for k, u := range us.byKey {
			if k != u.AccessKey || checkAccessKey(k) != nil || len(u.secretKey) == 0 {
				t.Fatalf("accepted user %q with key %q", u.AccessKey, k)
			}
			for _, l := range [][]string{u.Publish, u.Subscribe, u.Groups} {
				for _, p := range l {
					if checkPattern(p) != nil {
						t.Fatalf("accepted pattern %q", p)
					}
				}
			}
		}
	})
}

// FuzzRemoting feeds arbitrary extension fields and bodies to the classic
// ACL verifier: it must never panic, and never accept a request whose
// Signature is not the HMAC of the other fields and the body.
func FuzzRemoting(f *testing.F) {
	f.Add("app", "c2ln", "topic", "T", []byte("body"))
	f.Add("", "", "", "", []byte(nil))
	f.Add("app", "!!not base64", "AccessKey", "ops", []byte{0xff})
	f.Fuzz(func(t *testing.T, ak, sig, k, v string, body []byte) {
		us, _ := Parse([]byte(usersYAML))
		a := New(us)
		ext := map[string]string{RemotingAccessKey: ak, RemotingSignature: sig}
		if k != RemotingSignature {
			ext[k] = v
		}
		u, err := a.Remoting(ext, body)
		if err != nil {
			return
		}
		want := base64.StdEncoding.EncodeToString(mac(u.secretKey, remotingContent(ext, body)))
		if ext[RemotingSignature] != want {
			t.Fatalf("accepted %v as %s without its signature", ext, u.AccessKey)
		}
	})
}
