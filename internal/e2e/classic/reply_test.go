package classic

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestClassicRequestReply: the Go client's request/reply. A requester's
// producer.Request sends an ordinary message and waits; a push consumer
// answers each with consumer.CreateReplyMessage, sent by a producer to the
// cluster's reply topic (SEND_REPLY_MESSAGE); mqgate pushes the reply to
// the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT), which
// completes the request with the reply's body.
func TestClassicRequestReply(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 2)
	responder := newProducer(t, p)
	replyErrs := make(chan error, 16)
	newPushConsumer(t, p, group, topic, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range ms {
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err == nil {
				// (v2.1.2's CreateReplyMessage leaves the body out.)
				reply.Body = append([]byte("re: "), m.Body...)
				_, err = responder.SendSync(ctx, reply)
			}
			if err != nil {
				replyErrs <- fmt.Errorf("replying to %s: %w", m.Body, err)
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	requester := newProducer(t, p)
	ctx := ctxT(t, 90*time.Second)
	for i := range 3 {
		body := fmt.Sprintf("ping-%d", i)
		resp, err := requester.Request(ctx, 30*time.Second, primitive.NewMessage(topic, []byte(body)))
		select {
		case rerr := <-replyErrs:
			t.Fatal(rerr)
		default:
		}
		if err != nil {
			t.Fatalf("Request %s: %v", body, err)
		}
		if got, want := string(resp.Body), "re: "+body; got != want {
			t.Fatalf("reply %q, want %q (properties %v)", got, want, resp.GetProperties())
		}
	}
}
