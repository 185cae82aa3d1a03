package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/storage"
)

// openLite opens the lite topics of every LITE topic from the store (see
// broker/lite): their index from the parents' queues, the groups'
// positions from the lite journal, written through the replica group in
// cluster mode like every other record.
func (b *Broker) openLite(ctx context.Context, st *storage.Store, store storeWriter, meta *metadata.Service) (*lite.Service, error) {
	data, ok, err := st.Meta().LoadBlob(pop.KeyBlob)
	if err != nil || !ok || len(data) < 20 {
		return nil, fmt.Errorf("lite topics: the receipt-handle key is missing or unreadable: %v", err)
	}
	cfg := b.cfg.Lite
	cfg.Clock, cfg.Logger, cfg.Key, cfg.DeadLetters = b.cfg.Clock, b.log, data[4:], meta.EnsureDLQ
	cfg.DLQQueue = func(t model.Topic) int32 { return pop.DLQQueue(t, b.cfg.Placement) }
	cfg.OnUnsubscribed = func(n lite.Unsubscribed) {
		if f := b.liteNotice.Load(); f != nil {
			(*f)(n)
		}
	}
	return lite.Open(ctx, cfg, store, meta)
}

// SetLiteNotifier installs where lite unsubscription notices go (the v2
// edge sends each client a NotifyUnsubscribeLiteCommand).
func (b *Broker) SetLiteNotifier(f func(lite.Unsubscribed)) { b.liteNotice.Store(&f) }

// LiteLimits are what lite clients are told: the subscription quota and
// the longest lite topic name.
func (b *Broker) LiteLimits() (subscriptionQuota, maxLiteTopic int) {
	c := b.cfg.Lite.WithDefaults()
	return c.SubscriptionQuota, c.MaxLiteTopic
}

// LiteSyncRequest changes a lite consumer's subscription.
type LiteSyncRequest struct {
	ClientID, Group, Topic string
	Action                 lite.Action
	Lites                  []string
	Start                  lite.Start
}

// SyncLiteSubscription applies a lite consumer's subscription change on
// LITE topic req.Topic (KindBadRequest for another type).
func (b *Broker) SyncLiteSubscription(ctx context.Context, req LiteSyncRequest) error {
	t, g, err := b.resolve(ctx, req.Group, req.Topic)
	if err != nil {
		return err
	}
	if t.Type != model.TopicLite {
		return mqerr.Errorf(mqerr.KindBadRequest, "topic %q is %s, not LITE: it has no lite topics", t.Name, t.Type)
	}
	return b.s().lite.Sync(lite.SyncRequest{ClientID: req.ClientID, Group: g.Name, Topic: t, Action: req.Action, Lites: req.Lites, Start: req.Start})
}

// LiteTopics lists a LITE topic's lite topics with each group's backlog.
func (b *Broker) LiteTopics(ctx context.Context, topic, prefix, after string, limit int) (lite.Page, error) {
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return lite.Page{}, err
	}
	if t.Type != model.TopicLite {
		return lite.Page{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q is %s, not LITE: it has no lite topics", t.Name, t.Type)
	}
	return b.s().lite.List(t.Name, prefix, after, limit), nil
}

// ExpireLiteTopics drops expired lite topics now (it runs every
// ExpiryInterval anyway).
func (b *Broker) ExpireLiteTopics() { b.s().lite.Expire() }

// liteTopic returns topic for a lite receipt handle: it must be LITE.
func (b *Broker) liteTopic(ctx context.Context, topic string) (model.Topic, error) {
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return t, err
	}
	if t.Type != model.TopicLite {
		return t, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "invalid receipt handle: a lite topic's handle, and %q is not a LITE topic", topic)
	}
	return t, nil
}

func repeatErr(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func (b *Broker) liteReceive(ctx context.Context, t model.Topic, g model.Group, req ReceiveRequest, max int) ([]*model.Delivered, error) {
	invisible := req.Invisible
	if req.AutoRenew {
		invisible = AutoRenewInvisible
	}
	return b.s().lite.Receive(ctx, lite.ReceiveRequest{Group: g, Topic: t, ClientID: req.ClientID, Max: max,
		Invisible: invisible, AutoRenew: req.AutoRenew, Wait: req.Wait, Closed: b.s().hub.Closed()})
}

// ChangeLiteInvisible is ChangeInvisible for a lite delivery with
// upstream's suspend flag: the redelivery does not count an attempt.
func (b *Broker) changeLiteInvisible(t model.Topic, group, handle string, d time.Duration, suspend bool) (string, error) {
	return b.s().lite.ChangeInvisible(group, t, handle, d, suspend)
}
