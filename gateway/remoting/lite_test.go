package remoting

import (
	"strings"
	"testing"

	"github.com/mqgate/mqgate/broker/model"
)

// A LITE topic's lite topics are for v2 clients: a classic send, pull or
// POP of it answers an error that says so.
func TestLiteTopicRefusedOverRemoting(t *testing.T) {
	e := newEnv(t)
	if _, err := e.b.CreateTopic(e.ctx, model.Topic{Name: "chat", Type: model.TopicLite, Queues: 1}); err != nil {
		t.Fatal(err)
	}
	c := e.dial()
	says := func(what string, code int32, remark string) {
		t.Helper()
		if code == codeSuccess || !strings.Contains(remark, "LITE topic") || !strings.Contains(remark, "gRPC") {
			t.Fatalf("%s: code %d remark %q", what, code, remark)
		}
	}
	r := e.send(c, "chat", 0, "x", props("UNIQ_KEY", "U1", "__LITE_TOPIC", "conv"))
	says("send", r.Code, r.Remark)
	r = e.pull(c, "g", "chat", 0, 0)
	says("pull", r.Code, r.Remark)
	r = e.pop(c, "g", "chat", 1)
	says("pop", r.Code, r.Remark)
}
