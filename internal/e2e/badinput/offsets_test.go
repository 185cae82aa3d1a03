package badinput

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// consUsers adds cons, who may consume only topa and topb as grpa, to the
// admin the other cases sign as.
const consUsers = `users:
  - {accessKey: app, secretKey: app-secret, admin: true}
  - {accessKey: cons, secretKey: cons-secret, publish: [], subscribe: [topa, topb], groups: [grpa]}
`

// startUsers is start with another users file.
func startUsers(t *testing.T, users string) *server {
	t.Helper()
	e2eutil.Begin(t)
	file := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(file, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, testutil.StartOptions{Args: []string{"--auth-file", file, "--auto-create"}})
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &server{t: t, p: p, grpc: v2.NewMessagingServiceClient(conn)}
}

// TestRemotingOffsetsReadNothingForeign: the classic requests that name a
// message by its commit-log offset (CONSUMER_SEND_MSG_BACK 36,
// VIEW_MESSAGE_BY_ID 33) or by a key (QUERY_MESSAGE 12), sent as raw
// signed frames by cons, a user who may consume only topa and topb as
// grpa. Walking every offset of the log with send-backs into grpa's
// dead-letter topic, viewing them, or querying topic private's keys
// yields no byte of private: each is NO_PERMISSION, the same answer
// whether a message starts at the offset or not. cons's own message goes
// back as before. Malformed offsets get a clear error, and the server
// serves a signed client afterwards.
func TestRemotingOffsetsReadNothingForeign(t *testing.T) {
	s := startUsers(t, consUsers)
	s.good()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dial := func(ak, sk string) *client.Conn {
		c, err := client.Dial(ctx, s.p.Remoting, codec.JSON)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetCredentials(ak, sk)
		return c
	}
	call := func(c *client.Conn, code int32, ext map[string]string, body []byte) *codec.Command {
		t.Helper()
		r, err := c.Invoke(ctx, &codec.Command{Code: code, Ext: ext, Body: body})
		if err != nil {
			t.Fatalf("request %d: %v", code, err)
		}
		return r
	}
	admin, cons := dial(accessKey, secretKey), dial("cons", "cons-secret")
	send := func(topic, body, key string) int64 {
		t.Helper()
		r := call(admin, 10, map[string]string{"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0",
			"bornTimestamp": "1", "flag": "0", "properties": "KEYS\x01" + key + "\x02"}, []byte(body))
		if r.Code != 0 {
			t.Fatalf("send to %s: %d %s", topic, r.Code, r.Remark)
		}
		_, phys, err := wire.ParseOffsetMsgID(r.Ext["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		return phys
	}
	own := send("topa", "own-message", "ka")
	var private []int64
	for i := range 3 {
		private = append(private, send("private", fmt.Sprint("secret-", i), "kp"))
	}
	end := private[len(private)-1] + 512 // past the log's end

	// cons consumes topa as grpa.
	pull := func(topic string) []wire.Record {
		t.Helper()
		r := call(cons, 11, map[string]string{"consumerGroup": "grpa", "topic": topic, "queueId": "0", "queueOffset": "0",
			"maxMsgNums": "32", "sysFlag": "0", "commitOffset": "-1", "suspendTimeoutMillis": "0", "subscription": "*", "expressionType": "TAG"}, nil)
		if r.Code == 19 || r.Code == 20 { // PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY
			return nil
		}
		if r.Code != 0 {
			t.Fatalf("pull %s as cons: %d %s", topic, r.Code, r.Remark)
		}
		rs, err := wire.DecodeRecords(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	var rs []wire.Record
	testutil.Eventually(t, "topa's message", func() bool { rs = pull("topa"); return len(rs) > 0 })
	if len(rs) != 1 || rs[0].PhysOffset != own {
		t.Fatalf("cons pulled topa: %+v", rs)
	}
	back := func(off string) *codec.Command {
		return call(cons, 36, map[string]string{"offset": off, "group": "grpa", "delayLevel": "-1", "maxReconsumeTimes": "16"}, nil)
	}

	// The walk: every offset of the log, as a send-back and as a view.
	refusal := ""
	for off := int64(0); off < end; off++ {
		if off == own {
			continue
		}
		for _, r := range []*codec.Command{back(fmt.Sprint(off)), call(cons, 33, map[string]string{"offset": fmt.Sprint(off)}, nil)} {
			if r.Code != 16 || strings.Contains(r.Remark, "private") || bytes.Contains(r.Body, []byte("secret")) {
				t.Fatalf("offset %d as cons: %d %q (%d body bytes), want NO_PERMISSION naming no topic", off, r.Code, r.Remark, len(r.Body))
			}
			remark := strings.Replace(r.Remark, fmt.Sprint(off), "N", 1)
			if refusal == "" {
				refusal = remark
			} else if remark != refusal {
				t.Fatalf("offset %d: refusal %q differs from %q: the answer tells what the offset holds", off, remark, refusal)
			}
		}
	}
	if r := call(cons, 12, map[string]string{"topic": "private", "key": "kp", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9223372036854775807"}, nil); r.Code != 16 {
		t.Fatalf("QUERY_MESSAGE private as cons: %d %q", r.Code, r.Remark)
	}
	// cons's own message still goes back, and cons reads the copy: the
	// only record of grpa's dead-letter topic, so nothing the walk sent
	// back before it reached there.
	if r := back(fmt.Sprint(own)); r.Code != 0 {
		t.Fatalf("send-back of cons's own message: %d %q", r.Code, r.Remark)
	}
	testutil.Eventually(t, "the dead letter", func() bool { rs = pull("%DLQ%grpa"); return len(rs) > 0 })
	if len(rs) != 1 || string(rs[0].Body) != "own-message" {
		t.Fatalf("%%DLQ%%grpa holds %d records, want only cons's own message: first %q", len(rs), rs[0].Body)
	}
	// The admin may view private's messages; a message of private is
	// still not grpa's to send back.
	if r := call(admin, 33, map[string]string{"offset": fmt.Sprint(private[0])}, nil); r.Code != 0 || !bytes.Contains(r.Body, []byte("secret-0")) {
		t.Fatalf("admin view of a private message: %d %q", r.Code, r.Remark)
	}
	if r := call(admin, 36, map[string]string{"offset": fmt.Sprint(private[0]), "group": "grpa", "delayLevel": "-1"}, nil); r.Code != 16 || !strings.Contains(r.Remark, `does not consume topic "private"`) {
		t.Fatalf("admin send-back of a private message as grpa: %d %q", r.Code, r.Remark)
	}

	// Malformed offsets: a clear answer, nothing else.
	for _, off := range []string{"", "x", "-1", "1e3", "99999999999999999999", "9223372036854775807", fmt.Sprint(own + 1)} {
		for _, c := range []*client.Conn{cons, admin} {
			for _, code := range []int32{33, 36} {
				r := call(c, code, map[string]string{"offset": off, "group": "grpa", "delayLevel": "-1"}, nil)
				switch {
				case r.Code == 0:
					t.Fatalf("request %d offset %q: accepted", code, off)
				case r.Remark == "":
					t.Fatalf("request %d offset %q: answer %d without a remark", code, off, r.Code)
				}
			}
		}
	}
	s.good()
}
