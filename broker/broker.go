package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/broker/delay"
	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/longpoll"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
)

// Config configures the broker.
type Config struct {
	// AutoCreate creates unknown topics and groups on first use.
	AutoCreate    bool
	DefaultQueues int32
	Limits        produce.Limits
	Clock         clock.Clock
	Logger        *slog.Logger
	// MaxParkedPolls bounds long polls waiting at once.
	MaxParkedPolls int
	// PopSnapshotInterval bounds the POP journal replayed at start.
	PopSnapshotInterval time.Duration
	// InheritedGrace: see pop.Config (cluster mode: the members' maximum
	// clock skew).
	InheritedGrace time.Duration
	// SnapshotOK: see pop.Config (cluster mode: whether this member still
	// leads since it activated).
	SnapshotOK func() bool
	// Txn tunes transaction checks.
	Txn txn.Config
	// Lite tunes lite topics (quotas, expiry); the broker fills its
	// clock, logger, key and notice hook.
	Lite lite.Config
	// Replicated, when set, is the replica group every write goes
	// through (cluster mode); the broker then opens in standby.
	Replicated Replicator
	// Placement is the queues this broker's store holds: zero (every
	// queue of every topic) but in a cluster of several data groups,
	// where it is the broker's group's (broker/placement). Sends, due
	// delayed messages, committed transactions and dead letters go to
	// the queues it holds; its transaction ids and recall handles name
	// its group (deferred.GroupPrefix).
	Placement placement.Of
	// Catalog, when set, is where topics and groups live instead of the
	// broker's own store (a data group other than group 0: see Catalog).
	Catalog Catalog
	// Tracers and Meters receive the broker's spans and metrics
	// (observe.go); nil turns either off. Pass a nil Tracers when spans
	// are not exported: then no span is even started.
	Tracers trace.TracerProvider
	Meters  metric.MeterProvider
}

// Broker owns the broker services and hands each the narrow store
// capabilities it needs.
//
// A replicated broker (Config.Replicated set) writes through the replica
// group instead of the store, and starts in standby: its services run
// only while Activate has made them live, on the member that leads the
// group (see replicated.go).
type Broker struct {
	cfg     Config
	started time.Time // when Open ran (runtime figures count from it)
	log     *slog.Logger
	store   *storage.Store
	w       writes
	obs     *observer
	limits  produce.Limits

	// svc holds the services of the current activation; nil before the
	// first. A deactivated broker keeps its closed services here, so a
	// call still under way fails on them instead of on a nil.
	svc    atomic.Pointer[services]
	active atomic.Bool

	// actMu serializes Activate, Deactivate and Close, and guards
	// checkBack.
	actMu     sync.Mutex
	checkBack txn.CheckBackSender

	// liteNotice receives lite unsubscription notices (SetLiteNotifier).
	liteNotice atomic.Pointer[func(lite.Unsubscribed)]

	resetMu        sync.Mutex
	resetListeners []ResetListener // AddResetListener; called by ResetOffset
	// resetFences: per group and topic reset lately, the classic commits
	// it holds back (resetFence); written under resetMu.
	resetFences sync.Map // resetFenceKey → resetFence

	// redriveMu serializes RedriveDeadLetters: two at once would send the
	// same dead letters twice.
	redriveMu sync.Mutex
}

// services are the broker's services of one activation.
type services struct {
	hub   *longpoll.Hub
	meta  *metadata.Service
	prod  *produce.Service
	pop   *pop.Service
	delay *delay.Service
	txn   *txn.Service
	offs  *offset.Service
	lite  *lite.Service
}

// s returns the services of the current (or last) activation.
func (b *Broker) s() *services { return b.svc.Load() }

// Open starts the broker on an open store: at once, or in standby when
// cfg.Replicated is set.
func Open(ctx context.Context, cfg Config, st *storage.Store) (*Broker, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Broker{cfg: cfg, log: cfg.Logger, store: st, obs: newObserver(cfg.Tracers, cfg.Meters, cfg.Placement), started: cfg.Clock.Now(),
		limits: cfg.Limits.WithDefaults(), w: newWrites(st, cfg.Replicated, cfg.Catalog)}
	if cfg.Replicated == nil {
		if err := b.Activate(ctx); err != nil {
			return nil, err
		}
	}
	b.obs.observe(cfg.Meters, b)
	return b, nil
}

// Activate opens the services from the store's current state and makes
// them live. A replicated broker's member calls it once it leads its
// group and has applied every entry committed before; a single node's
// Open calls it.
func (b *Broker) Activate(ctx context.Context) error {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	if b.active.Load() {
		return nil
	}
	cfg, st := b.cfg, b.store
	// The services write for the leader term they are built in.
	w := b.w
	if cfg.Replicated != nil {
		w = w.forTerm(cfg.Replicated.Fence())
	}
	s := &services{hub: longpoll.New(cfg.MaxParkedPolls)}
	hub := s.hub
	var liteSvc atomic.Pointer[lite.Service]
	st.SetArrivalHook(func(topic string, q int32, _ int64) {
		hub.Notify(topic)                       // POP receives: any queue
		hub.Notify(longpoll.QueueKey(topic, q)) // pulls of that queue
		if l := liteSvc.Load(); l != nil {
			l.Arrived(topic) // lite receives of a LITE parent
		}
	})
	// While a receive waits for new messages the store writes what it
	// answers out at once rather than lingering for more.
	st.SetReadersWaiting(func() bool { return hub.Parked() > 0 })
	hub.SetOnPark(st.Hurry)
	s.meta = metadata.New(b.metaConfig(), w.meta, w.drop)
	p, err := pop.Open(ctx, pop.Config{Clock: cfg.Clock, Logger: cfg.Logger, Hub: s.hub, SnapshotInterval: cfg.PopSnapshotInterval,
		InheritedGrace: cfg.InheritedGrace, SnapshotOK: cfg.SnapshotOK, Placement: cfg.Placement},
		b.obs.popStore(w.store), st.Meta(), s.meta)
	if err != nil {
		return err
	}
	s.pop = p
	s.meta.OnTopicDeleted(p.DropTopic)
	s.meta.OnGroupDeleted(p.DropGroup)
	s.delay, err = delay.Open(ctx, delay.Config{Clock: cfg.Clock, Logger: cfg.Logger, Placement: cfg.Placement}, w.store, st.Meta(), s.meta)
	if err != nil {
		_ = p.Close(ctx)
		return err
	}
	tc := cfg.Txn
	tc.Clock, tc.Logger, tc.Placement = cfg.Clock, cfg.Logger, cfg.Placement
	s.txn, err = txn.Open(ctx, tc, w.store, st.Meta(), s.meta)
	if err != nil {
		_ = errors.Join(p.Close(ctx), s.delay.Close(ctx))
		return err
	}
	s.lite, err = b.openLite(ctx, st, w.store, s.meta)
	if err != nil {
		_ = errors.Join(p.Close(ctx), s.delay.Close(ctx), s.txn.Close(ctx))
		return err
	}
	liteSvc.Store(s.lite)
	s.meta.OnTopicDeleted(s.lite.DropTopic)
	s.offs = offset.New(st, w.offsets, s.hub, cfg.Clock)
	s.prod = produce.New(produce.Config{Limits: cfg.Limits, Clock: cfg.Clock, Delay: s.delay, Txn: s.txn, Lite: s.lite,
		LiteAppender: b.obs.appender(w.store), Space: st, Placement: cfg.Placement}, b.obs.appender(w.sends), s.meta)
	b.svc.Store(s)
	b.active.Store(true)
	// The check-backs go out once the services are published: a sender
	// looks the half message up through them (the classic listener's
	// Classic.HalfRecord), and a check due at once (recovered overdue)
	// would otherwise find the services of the last activation, or none.
	// A check before this is not counted and comes again at the next
	// interval.
	if b.checkBack != nil {
		s.txn.SetSender(b.checkBack)
	}
	return nil
}

// metaConfig is the metadata service's configuration: a cluster of
// several data groups gives each its own queue of a dead-letter topic.
func (b *Broker) metaConfig() metadata.Config {
	cfg := b.cfg
	return metadata.Config{AutoCreate: cfg.AutoCreate, DefaultQueues: cfg.DefaultQueues, Clock: cfg.Clock, Logger: cfg.Logger,
		DLQQueues: int32(max(cfg.Placement.Groups, 1))}
}

// Active reports whether the services are live.
func (b *Broker) Active() bool { return b.active.Load() }

// Deactivate stops the live services (parked receives answer "no
// message", background work stops) and returns the broker to standby. A
// replicated broker's member calls it when it stops leading; its writes
// fail from then on anyway (the replica refuses them).
func (b *Broker) Deactivate(ctx context.Context) error {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	return b.deactivate(ctx)
}

// deactivate is Deactivate. b.actMu must be held.
func (b *Broker) deactivate(ctx context.Context) error {
	if !b.active.Swap(false) {
		return nil
	}
	s := b.s()
	s.hub.Close()
	return errors.Join(s.txn.Close(ctx), s.delay.Close(ctx), s.pop.Close(ctx), s.lite.Close(ctx))
}

// ReloadKeys has the live services take the token key rings (receipt
// handles, transaction ids, recall handles) from the metadata store again,
// after a cluster replicated new ones: they sign with the newest keys from
// then on. A broker in standby loads them when it activates.
func (b *Broker) ReloadKeys() error {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	if !b.active.Load() {
		return nil
	}
	s := b.s()
	return errors.Join(s.pop.ReloadKeys(), s.txn.ReloadKeys(), s.delay.ReloadKeys())
}

// SetCheckBackSender installs the port transaction checks go through.
func (b *Broker) SetCheckBackSender(c txn.CheckBackSender) {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	b.checkBack = c
	if s := b.s(); s != nil {
		s.txn.SetSender(c)
	}
}

// Drain wakes every parked receive (they answer "no message") and makes
// new receives return at once. Called first at shutdown.
func (b *Broker) Drain() {
	if s := b.s(); s != nil {
		s.hub.Close()
	}
}

// Close stops background work and persists final state. The store is
// closed by its owner afterwards.
func (b *Broker) Close(ctx context.Context) error {
	b.obs.close()
	b.actMu.Lock()
	defer b.actMu.Unlock()
	return b.deactivate(ctx)
}

// Limits are the message limits producers are told about.
func (b *Broker) Limits() produce.Limits { return b.limits }

// CreateTopic creates a topic.
func (b *Broker) CreateTopic(ctx context.Context, t model.Topic) (model.Topic, error) {
	return b.s().meta.CreateTopic(ctx, t)
}

// Topic returns a topic, creating a NORMAL one when auto-create is on.
func (b *Broker) Topic(ctx context.Context, name string) (model.Topic, error) {
	return b.s().meta.Topic(ctx, name)
}

// GetTopic returns a topic without auto-creating it.
func (b *Broker) GetTopic(ctx context.Context, name string) (model.Topic, error) {
	return b.s().meta.GetTopic(ctx, name)
}

// ListTopics lists topics sorted by name.
func (b *Broker) ListTopics(ctx context.Context) ([]model.Topic, error) {
	return b.s().meta.ListTopics(ctx)
}

// DeleteTopic deletes a topic and its queues.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	return b.s().meta.DeleteTopic(ctx, name)
}

// CreateGroup creates a consumer group.
func (b *Broker) CreateGroup(ctx context.Context, g model.Group) (model.Group, error) {
	return b.s().meta.CreateGroup(ctx, g)
}

// Group returns a group, creating it when auto-create is on.
func (b *Broker) Group(ctx context.Context, name string) (model.Group, error) {
	return b.s().meta.Group(ctx, name)
}

// GetGroup returns a group without auto-creating it.
func (b *Broker) GetGroup(ctx context.Context, name string) (model.Group, error) {
	return b.s().meta.GetGroup(ctx, name)
}

// ListGroups lists groups sorted by name.
func (b *Broker) ListGroups(ctx context.Context) ([]model.Group, error) {
	return b.s().meta.ListGroups(ctx)
}

// DeleteGroup deletes a group.
func (b *Broker) DeleteGroup(ctx context.Context, name string) error {
	return b.s().meta.DeleteGroup(ctx, name)
}

// Send validates and stores msgs, all for topic. A returned error rejects
// the whole request; per-message outcomes are in the results, in order.
func (b *Broker) Send(ctx context.Context, topic string, msgs []*model.Message, p model.Producer) (res []model.SendResult, err error) {
	ctx, sp := b.obs.startSend(ctx, topic, msgs)
	defer func() { b.obs.sent(ctx, sp, topic, msgs, res, err) }()
	if err := metadata.ValidateTopicName(topic); err != nil {
		return nil, err
	}
	return b.s().prod.Send(ctx, topic, msgs, p)
}

// Receive pops up to req.Max visible messages, long-polling up to
// req.Wait. Nothing found ⇒ KindMessageNotFound.
func (b *Broker) Receive(ctx context.Context, req ReceiveRequest) (out []*model.Delivered, err error) {
	ctx, sp := b.obs.startReceive(ctx, req)
	defer func() { b.obs.received(ctx, sp, req, out, err) }()
	select {
	case <-b.s().hub.Closed():
		// Draining for shutdown: acks are refused from now on, so a
		// delivery would only come back as a duplicate after the restart.
		return nil, mqerr.Errorf(mqerr.KindMessageNotFound, "mqgate is draining for shutdown: no new deliveries")
	default:
	}
	t, g, err := b.resolve(ctx, req.Group, req.Topic)
	if err != nil {
		return nil, err
	}
	if !t.Perm.Readable() {
		return nil, mqerr.Errorf(mqerr.KindForbidden, "topic %q is not readable", t.Name)
	}
	if !req.AutoRenew && (req.Invisible < MinReceiveInvisible || req.Invisible > MaxInvisible) {
		return nil, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible duration %s is outside [%s, %s]", req.Invisible, MinReceiveInvisible, MaxInvisible)
	}
	max := req.Max
	if max <= 0 {
		max = 1
	}
	if max > MaxReceiveBatch {
		max = MaxReceiveBatch
	}
	if req.QueueID >= t.Queues {
		return nil, mqerr.Errorf(mqerr.KindBadRequest, "topic %q has no queue %d", t.Name, req.QueueID)
	}
	if req.QueueID < 0 {
		req.QueueID = -1
	}
	if t.Type == model.TopicLite {
		return b.liteReceive(ctx, t, g, req, max)
	}
	return b.s().pop.Receive(ctx, pop.ReceiveRequest{Group: g, Topic: t, Filter: req.Filter, Max: max, Invisible: req.Invisible,
		AutoRenew: req.AutoRenew, ClientID: req.ClientID, Wait: req.Wait, QueueID: req.QueueID, AttemptID: req.AttemptID})
}

func (b *Broker) resolve(ctx context.Context, group, topic string) (model.Topic, model.Group, error) {
	if err := metadata.ValidateTopicName(topic); err != nil {
		return model.Topic{}, model.Group{}, err
	}
	if err := metadata.ValidateGroupName(group); err != nil {
		return model.Topic{}, model.Group{}, err
	}
	t, err := b.s().meta.Topic(ctx, topic)
	if err != nil {
		return model.Topic{}, model.Group{}, err
	}
	g, err := b.s().meta.Group(ctx, group)
	if err != nil {
		return model.Topic{}, model.Group{}, err
	}
	return t, g, nil
}

func (b *Broker) checkNames(group, topic string) error {
	return errors.Join(metadata.ValidateTopicName(topic), metadata.ValidateGroupName(group))
}

// Ack acknowledges deliveries by handle; one error (or nil) per handle.
func (b *Broker) Ack(ctx context.Context, group, topic string, handles []string) (errs []error) {
	ctx, sp := b.obs.startAck(ctx, group, topic, len(handles))
	defer func() { b.obs.acked(ctx, sp, group, topic, errs) }()
	if err := b.checkNames(group, topic); err != nil {
		errs := make([]error, len(handles))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(handles) > 0 && lite.IsHandle(handles[0]) {
		t, err := b.liteTopic(ctx, topic)
		if err != nil {
			return repeatErr(err, len(handles))
		}
		return b.confirmAll(ctx, b.s().lite.Ack(ctx, group, t, handles))
	}
	return b.confirmAll(ctx, b.s().pop.Ack(ctx, group, topic, handles))
}

// memoryRefusal reports whether err is a refusal memory decided: a
// receipt handle, transaction id or recall handle it does not know, or
// one expired or superseded.
func memoryRefusal(err error) bool {
	switch mqerr.KindOf(err) {
	case mqerr.KindInvalidReceiptHandle, mqerr.KindInvalidTransactionID, mqerr.KindNotFound, mqerr.KindMessageNotFound:
		return err != nil
	}
	return false
}

// confirmRefusal confirms a refusal memory decided (memoryRefusal): in a
// replica group, a member that stopped leading without noticing yet (it
// was paused) decides from a memory another leader has moved past, so it
// first checks that it still leads (a read index). When it does not, the
// answer is the replication error, which clients retry elsewhere.
func (b *Broker) confirmRefusal(ctx context.Context, err error) error {
	if b.w.current != nil && memoryRefusal(err) {
		if rerr := b.w.readCurrent(ctx); rerr != nil {
			return rerr
		}
	}
	return err
}

// confirmAll is confirmRefusal for each of errs, asking once.
func (b *Broker) confirmAll(ctx context.Context, errs []error) []error {
	if b.w.current == nil {
		return errs
	}
	asked := false
	var denied error
	for i, err := range errs {
		if !memoryRefusal(err) {
			continue
		}
		if !asked {
			asked, denied = true, b.w.readCurrent(ctx)
		}
		if denied != nil {
			errs[i] = denied
		}
	}
	return errs
}

// ChangeInvisible moves a delivery's visibility to now+d and returns its
// new handle (the old one is superseded).
func (b *Broker) ChangeInvisible(ctx context.Context, group, topic, handle string, d time.Duration) (string, error) {
	return b.ChangeInvisibleSuspend(ctx, group, topic, handle, d, false)
}

// ChangeInvisibleSuspend is ChangeInvisible with upstream's suspend flag:
// for a lite delivery, the redelivery does not count an attempt; other
// deliveries ignore it.
func (b *Broker) ChangeInvisibleSuspend(ctx context.Context, group, topic, handle string, d time.Duration, suspend bool) (string, error) {
	if err := b.checkNames(group, topic); err != nil {
		return "", err
	}
	if d < 0 || d > MaxInvisible {
		return "", mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible duration %s is outside [0, %s]", d, MaxInvisible)
	}
	if lite.IsHandle(handle) {
		t, err := b.liteTopic(ctx, topic)
		if err != nil {
			return "", err
		}
		h, err := b.changeLiteInvisible(t, group, handle, d, suspend)
		return h, b.confirmRefusal(ctx, err)
	}
	h, err := b.s().pop.ChangeInvisible(ctx, group, topic, handle, d)
	return h, b.confirmRefusal(ctx, err)
}

// Release withdraws deliveries that never reached the consumer: visible
// again at once, without counting an attempt.
func (b *Broker) Release(ctx context.Context, group, topic string, handles []string) []error {
	if err := b.checkNames(group, topic); err != nil {
		errs := make([]error, len(handles))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(handles) > 0 && lite.IsHandle(handles[0]) {
		t, err := b.liteTopic(ctx, topic)
		if err != nil {
			return repeatErr(err, len(handles))
		}
		return b.s().lite.Release(group, t, handles)
	}
	return b.s().pop.Release(ctx, group, topic, handles)
}

// ForwardToDLQ moves a delivery to the group's dead-letter topic.
func (b *Broker) ForwardToDLQ(ctx context.Context, group, topic, handle string) error {
	if err := b.checkNames(group, topic); err != nil {
		return err
	}
	if lite.IsHandle(handle) {
		t, err := b.liteTopic(ctx, topic)
		if err != nil {
			return err
		}
		return b.confirmRefusal(ctx, b.s().lite.ForwardToDLQ(ctx, group, t, handle))
	}
	return b.confirmRefusal(ctx, b.s().pop.ForwardToDLQ(ctx, group, topic, handle))
}

// ReleaseClient ends auto-renewal for a client that is gone.
func (b *Broker) ReleaseClient(clientID string) {
	b.s().pop.ReleaseClient(context.Background(), clientID)
	b.s().lite.ReleaseClient(clientID)
}

// ReleaseUnseen ends auto-renewal for every client with renewed
// deliveries that seen does not know: a member that became leader never
// saw the clients of the previous one go away, so it releases those that
// have not come to it (cluster mode, a while after activating).
func (b *Broker) ReleaseUnseen(ctx context.Context, seen func(clientID string) bool) []string {
	var released []string
	p := b.s().pop
	for _, c := range p.RenewedClients() {
		if !seen(c) {
			p.ReleaseClient(ctx, c)
			released = append(released, c)
		}
	}
	return released
}

// PopStats describes every POP subscription (in flight, positions).
func (b *Broker) PopStats() []pop.Stats { return b.s().pop.Stats() }

// EndTransaction commits or rolls back a transactional message. Repeating
// the applied resolution is OK; Unspecified changes nothing.
func (b *Broker) EndTransaction(ctx context.Context, topic, messageID, transactionID string, r txn.Resolution) error {
	if err := metadata.ValidateTopicName(topic); err != nil {
		return err
	}
	if strings.TrimSpace(transactionID) == "" {
		return mqerr.Errorf(mqerr.KindInvalidTransactionID, "transaction id is blank")
	}
	if _, err := b.s().meta.GetTopic(ctx, topic); err != nil {
		return err
	}
	return b.confirmRefusal(ctx, b.s().txn.End(ctx, topic, messageID, transactionID, r))
}

// Recall cancels a pending delayed message by its recall handle and
// returns its message id.
func (b *Broker) Recall(ctx context.Context, topic, handle string) (string, error) {
	if err := metadata.ValidateTopicName(topic); err != nil {
		return "", err
	}
	if strings.TrimSpace(handle) == "" {
		return "", mqerr.Errorf(mqerr.KindBadRequest, "recall handle is blank")
	}
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return "", err
	}
	h, err := b.s().delay.Recall(ctx, t, handle)
	return h, b.confirmRefusal(ctx, err)
}

// Pull reads a queue from an offset without POP state (see offset.Pull).
func (b *Broker) Pull(ctx context.Context, group, topic string, queue int32, from int64, max int, f model.Filter, wait time.Duration) (offset.PullResult, error) {
	t, _, err := b.resolve(ctx, group, topic)
	if err != nil {
		return offset.PullResult{}, err
	}
	if !t.Perm.Readable() {
		return offset.PullResult{}, mqerr.Errorf(mqerr.KindForbidden, "topic %q is not readable", t.Name)
	}
	if err := b.w.readCurrent(ctx); err != nil {
		return offset.PullResult{}, err
	}
	res, err := b.s().offs.Pull(ctx, t, queue, from, max, f, wait)
	b.obs.pulledDelivered(group, t.Name, res.Messages)
	return res, err
}

// UpdateOffset commits a group's offset for a queue; it is on disk when
// this returns nil.
func (b *Broker) UpdateOffset(ctx context.Context, group, topic string, queue int32, off int64) error {
	t, _, err := b.resolve(ctx, group, topic)
	if err != nil {
		return err
	}
	_, err = b.s().offs.Update(t, group, queue, off, true)
	return err
}

// GetOffset returns a group's committed offset for a queue.
func (b *Broker) GetOffset(ctx context.Context, group, topic string, queue int32) (int64, error) {
	t, _, err := b.resolve(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	if err := b.w.readCurrent(ctx); err != nil {
		return 0, err
	}
	return b.s().offs.Get(t, group, queue)
}

// QueryOffset finds the beginning, end or a time's offset of a queue.
func (b *Broker) QueryOffset(ctx context.Context, topic string, queue int32, p offset.Policy, at time.Time) (int64, error) {
	if err := metadata.ValidateTopicName(topic); err != nil {
		return 0, err
	}
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := b.w.readCurrent(ctx); err != nil {
		return 0, err
	}
	return b.s().offs.Query(t, queue, p, at)
}
