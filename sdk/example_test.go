package sdk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mqgate/mqgate/sdk"
)

// Send one message. With `make run` the topic is created on first use;
// otherwise create it first: `mqgate topic create greetings`.
func ExampleProducer_Send() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, endpoint) // e.g. "127.0.0.1:8081"
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	p, err := c.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"greetings"}})
	if err != nil {
		log.Fatal(err)
	}
	r, err := p.Send(ctx, &sdk.Message{Topic: "greetings", Body: []byte("Hello, mqgate!"), Keys: []string{"hello-1"}})
	if err != nil {
		// errors.Is(err, sdk.ErrOutcomeUnknown) means it may be stored:
		// resending may duplicate it.
		log.Fatal(err)
	}
	fmt.Println("sent, message id has", len(r.MessageID), "characters")
	// Output: sent, message id has 34 characters
}

// Receive, process and acknowledge. An unacknowledged message comes back
// when its invisible duration ends.
func ExampleSimpleConsumer_Receive() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, endpoint)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := c.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"orders"}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Send(ctx, &sdk.Message{Topic: "orders", Body: []byte("order #1"), Tag: "new"}); err != nil {
		log.Fatal(err)
	}

	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{
		Group:         "shipping",
		Subscriptions: map[string]string{"orders": "new"}, // tag filter; "*" for all
		Await:         5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := cons.Receive(ctx, 16, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s (tag %s, attempt %d)\n", m.Body, m.Tag, m.DeliveryAttempt)
		if err := cons.Ack(ctx, m); err != nil {
			log.Println("ack failed; the message will be redelivered:", err)
		}
	}
	// Output: order #1 (tag new, attempt 1)
}

// FIFO: messages of one message group reach a FIFO consumer group in send
// order, one at a time. The topic and group are created as FIFO:
//
//	mqgate topic create payments --type FIFO
//	mqgate group create ledger --fifo
func Example_fifo() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, endpoint)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := c.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"payments"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, step := range []string{"open", "debit", "close"} {
		m := &sdk.Message{Topic: "payments", Body: []byte(step), MessageGroup: "account-42"}
		if _, err := p.Send(ctx, m); err != nil {
			log.Fatal(err)
		}
	}

	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: "ledger", Subscriptions: map[string]string{"payments": "*"}, Await: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for done := 0; done < 3; {
		msgs, err := cons.Receive(ctx, 32, 30*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		// The next message of account-42 is held back until this one is acked.
		for _, m := range msgs {
			fmt.Println(m.MessageGroup, string(m.Body))
			if err := cons.Ack(ctx, m); err != nil {
				log.Fatal(err)
			}
			done++
		}
	}
	// Output:
	// account-42 open
	// account-42 debit
	// account-42 close
}

// Delay: a message becomes visible at its delivery time (at most a day
// ahead) in a DELAY topic: `mqgate topic create reminders --type DELAY`.
func Example_delay() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, endpoint)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := c.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"reminders"}})
	if err != nil {
		log.Fatal(err)
	}
	due := time.Now().Add(2 * time.Second)
	r, err := p.Send(ctx, &sdk.Message{Topic: "reminders", Body: []byte("call back"), DeliveryTime: due})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recall handle issued:", r.RecallHandle != "")

	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: "reminder-workers", Subscriptions: map[string]string{"reminders": "*"}, Await: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := cons.Receive(ctx, 1, 30*time.Second) // waits on the server until it is due
	if err != nil || len(msgs) == 0 {
		log.Fatal("nothing delivered: ", err)
	}
	m := msgs[0]
	fmt.Println(string(m.Body), "- delivered on time:", !time.Now().Before(due.Truncate(time.Millisecond)))
	if err := cons.Ack(ctx, m); err != nil {
		log.Fatal(err)
	}
	// Output:
	// recall handle issued: true
	// call back - delivered on time: true
}
