package broker

import (
	"context"
	"errors"
	"time"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/pop"
)

// This file is the dead-letter side of the facade for operators: listing a
// group's dead letters and redriving them to the topics they came from.
//
// A group consumes its own dead-letter topic (%DLQ%<group>, one queue) as
// a classic consumer would: its committed offset in that queue marks what
// was redriven. Pending dead letters are those from the committed offset
// (the queue's min offset before the first redrive) to the queue's end.

// MaxDeadLetters caps one DeadLetters or RedriveDeadLetters call.
const MaxDeadLetters = 256

// DeadLetterPage is DeadLetters' answer.
type DeadLetterPage struct {
	// Topic is the group's dead-letter topic.
	Topic string
	// Pending counts the dead letters not redriven yet.
	Pending int64
	// Messages are the oldest pending ones, at most the max asked.
	Messages []*model.Delivered
}

// DeadLetters returns a group's pending dead letters, oldest first (at
// most max; ≤ 0 means 32). It changes nothing.
func (b *Broker) DeadLetters(ctx context.Context, group string, max int) (DeadLetterPage, error) {
	if max <= 0 {
		max = 32
	}
	max = min(max, MaxDeadLetters)
	t, q, from, page, err := b.deadLetterStart(ctx, group)
	if err != nil || page.Pending == 0 {
		return page, err
	}
	res, err := b.s().offs.Pull(ctx, t, q, from, max, model.Filter{}, 0)
	if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		return page, err
	}
	page.Messages = res.Messages
	return page, nil
}

// deadLetterStart resolves a group's dead-letter topic, the queue this
// broker dead-letters into (its data group's: pop.DLQQueue) and the
// offset its pending dead letters start at.
func (b *Broker) deadLetterStart(ctx context.Context, group string) (model.Topic, int32, int64, DeadLetterPage, error) {
	if err := metadata.ValidateGroupName(group); err != nil {
		return model.Topic{}, 0, 0, DeadLetterPage{}, err
	}
	if _, err := b.s().meta.GetGroup(ctx, group); err != nil {
		return model.Topic{}, 0, 0, DeadLetterPage{}, err
	}
	page := DeadLetterPage{Topic: metadata.DLQTopic(group)}
	t, err := b.s().meta.GetTopic(ctx, page.Topic) // exists with the group
	if err != nil {
		return t, 0, 0, page, err
	}
	q := pop.DLQQueue(t, b.cfg.Placement)
	lo, hi, err := b.s().offs.Range(t, q)
	if err != nil {
		return t, q, 0, page, err
	}
	from := lo
	if off, err := b.s().offs.Get(t, group, q); err == nil {
		from = max(off, lo)
	} else if mqerr.KindOf(err) != mqerr.KindOffsetNotFound {
		return t, q, 0, page, err
	}
	page.Pending = max(hi-from, 0)
	return t, q, from, page, nil
}

// RedriveResult is what RedriveDeadLetters did.
type RedriveResult struct {
	// Redriven are the dead letters sent back, oldest first: each one's
	// new message as its origin topic stored it.
	Redriven []Redriven
	// Pending counts the dead letters left.
	Pending int64
}

// Redriven is one dead letter sent back to its topic.
type Redriven struct {
	MessageID   string
	Topic       string
	QueueID     int32
	QueueOffset int64
}

// RedriveDeadLetters sends up to max (≤ 0: 32) of a group's oldest pending
// dead letters back to the topics they were consumed from, as new
// messages with their id, tag, keys, properties and body and a fresh
// delivery count, then commits the group's offset in its dead-letter
// topic past them. It stops at the first send that fails, having
// committed what was sent before it. A crash between a send and the
// commit sends that dead letter again on the next redrive (at least once).
func (b *Broker) RedriveDeadLetters(ctx context.Context, group string, max int) (RedriveResult, error) {
	b.redriveMu.Lock()
	defer b.redriveMu.Unlock()
	page, err := b.DeadLetters(ctx, group, max)
	if err != nil {
		return RedriveResult{}, err
	}
	out := RedriveResult{Pending: page.Pending}
	if len(page.Messages) == 0 {
		return out, nil
	}
	t, err := b.s().meta.GetTopic(ctx, page.Topic)
	if err != nil {
		return out, err
	}
	var next int64 = -1
	var sendErr error
	for _, d := range page.Messages {
		origin := d.DLQOriginTopic
		if origin == "" {
			sendErr = mqerr.Errorf(mqerr.KindInternal, "dead letter %s at offset %d names no origin topic", d.ID, d.QueueOffset)
			break
		}
		m := d.Message
		m.Topic = origin
		m.DeliveryTime = time.Time{}
		m.Transactional = false
		m.Type = model.MessageUnspecified
		m.ReconsumeTimes = 0
		res, err := b.Send(ctx, origin, []*model.Message{&m}, model.Producer{ClientID: "mqgate-redrive"})
		if err == nil && len(res) == 1 && res[0].Err != nil && mqerr.KindOf(res[0].Err) != mqerr.KindFlushTimeout {
			err = res[0].Err
		}
		if err != nil {
			sendErr = mqerr.Wrap(mqerr.KindOf(err), err, "redriving dead letter "+d.ID+" to "+origin)
			break
		}
		out.Redriven = append(out.Redriven, Redriven{MessageID: res[0].MessageID, Topic: origin, QueueID: res[0].QueueID, QueueOffset: res[0].Offset})
		next = d.QueueOffset + 1
	}
	if next >= 0 {
		if _, err := b.s().offs.Update(t, group, pop.DLQQueue(t, b.cfg.Placement), next, true); err != nil {
			return out, errors.Join(sendErr, err)
		}
		out.Pending -= int64(len(out.Redriven))
	}
	return out, sendErr
}
