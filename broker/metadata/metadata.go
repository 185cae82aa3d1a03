package metadata

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/metastore"
)

// Limits on created resources.
const (
	DefaultQueues = 8
	MaxQueues     = 1024
	MaxAttempts   = 1000
)

// Config configures the service.
type Config struct {
	// AutoCreate creates unknown topics (NORMAL, DefaultQueues) and groups
	// (defaults) on first use.
	AutoCreate    bool
	DefaultQueues int32
	Clock         clock.Clock
	// Logger is told, at warn level, of each topic and group auto-create
	// creates: a name nobody created is often a typo. Nil: slog.Default.
	Logger *slog.Logger
	// DLQQueues is how many queues a dead-letter topic has at least
	// (default 1): a cluster of several data groups gives each group one
	// (broker/placement), so that each dead-letters into a queue of its
	// own.
	DLQQueues int32
}

// Store is the part of storage/metastore the service uses.
type Store interface {
	PutTopic(t metastore.Topic) error
	DeleteTopic(name string) error
	Topic(name string) (metastore.Topic, bool)
	Topics() []metastore.Topic
	PutGroup(g metastore.Group) error
	DeleteGroup(name string) error
	Group(name string) (metastore.Group, bool)
	Groups() []metastore.Group
}

// Syncer is a Store whose reads can lag changes committed elsewhere (a
// cluster's catalog, changed through another member): Sync returns once
// the store holds every change committed before the call.
type Syncer interface {
	Sync(ctx context.Context) error
}

// QueueDropper removes a deleted topic's queues from the store.
type QueueDropper interface {
	DeleteTopic(ctx context.Context, topic string) error
}

// Service manages topics and groups.
type Service struct {
	cfg   Config
	store Store
	drop  QueueDropper
	// mu serialises creations so two auto-creates of one name agree.
	mu sync.Mutex
	// deleting holds the topics a DeleteTopic is removing (name →
	// struct{}): between the drop of their queues and their removal they
	// are not found, so no send lands in queues already dropped.
	deleting sync.Map
	// OnTopicDeleted and OnGroupDeleted let other services drop state.
	onTopicDeleted []func(string)
	onGroupDeleted []func(string)
}

// New returns the service.
func New(cfg Config, st Store, drop QueueDropper) *Service {
	if cfg.DefaultQueues <= 0 {
		cfg.DefaultQueues = DefaultQueues
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, store: st, drop: drop}
}

// OnTopicDeleted registers a callback run after a topic is deleted.
func (s *Service) OnTopicDeleted(f func(topic string)) {
	s.onTopicDeleted = append(s.onTopicDeleted, f)
}

// OnGroupDeleted registers a callback run after a group is deleted.
func (s *Service) OnGroupDeleted(f func(group string)) {
	s.onGroupDeleted = append(s.onGroupDeleted, f)
}

// caughtUp brings a lagging store (Syncer) up to date before a change
// decided on what it holds: a creation that must not find the name, a
// put that keeps what the stored one has. Called with mu held.
func (s *Service) caughtUp(ctx context.Context) error {
	sy, ok := s.store.(Syncer)
	if !ok {
		return nil
	}
	if err := sy.Sync(ctx); err != nil {
		if mqerr.Classified(err) {
			return err
		}
		return mqerr.Wrap(mqerr.KindUnavailable, err, "catching up with the catalog before changing it")
	}
	return nil
}

// Current catches a lagging store (Syncer) up before a read that must
// hold what was changed elsewhere before it was asked (an admin listing);
// a store that cannot catch up is read as it is.
func (s *Service) Current(ctx context.Context) {
	if sy, ok := s.store.(Syncer); ok {
		_ = sy.Sync(ctx)
	}
}

func storeErr(err error, what string) error {
	if err == nil {
		return nil
	}
	if mqerr.Classified(err) {
		return err // classified already (a replica group's refusal)
	}
	if errors.Is(err, storage.ErrClosed) {
		return mqerr.Wrap(mqerr.KindUnavailable, err, "store is closed")
	}
	return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "persisting "+what)
}

func toModelTopic(t metastore.Topic) model.Topic {
	mt := model.Topic{Name: t.Name, Queues: t.QueueCount, CreateTime: time.UnixMilli(t.CreateTime)}
	switch t.Type {
	case metastore.TopicFIFO:
		mt.Type = model.TopicFIFO
	case metastore.TopicDelay:
		mt.Type = model.TopicDelay
	case metastore.TopicTransaction:
		mt.Type = model.TopicTransaction
	case metastore.TopicMixed:
		mt.Type = model.TopicMixed
	case metastore.TopicLite:
		mt.Type = model.TopicLite
		if v, ok := t.Attributes[AttrLiteTTL]; ok {
			if d, err := time.ParseDuration(v); err == nil {
				mt.LiteTTL = d
			}
		}
	default:
		mt.Type = model.TopicNormal
	}
	switch t.Perm {
	case metastore.PermRead:
		mt.Perm = model.PermRead
	case metastore.PermWrite:
		mt.Perm = model.PermWrite
	case 0:
		mt.Perm = model.PermNone
	default:
		mt.Perm = model.PermReadWrite
	}
	return mt
}

func toMetaTopic(t model.Topic) metastore.Topic {
	mt := metastore.Topic{Name: t.Name, QueueCount: t.Queues, CreateTime: t.CreateTime.UnixMilli()}
	switch t.Type {
	case model.TopicFIFO:
		mt.Type = metastore.TopicFIFO
	case model.TopicDelay:
		mt.Type = metastore.TopicDelay
	case model.TopicTransaction:
		mt.Type = metastore.TopicTransaction
	case model.TopicMixed:
		mt.Type = metastore.TopicMixed
	case model.TopicLite:
		mt.Type = metastore.TopicLite
		if t.LiteTTL != 0 {
			mt.Attributes = map[string]string{AttrLiteTTL: t.LiteTTL.String()}
		}
	default:
		mt.Type = metastore.TopicNormal
	}
	switch t.Perm {
	case model.PermRead:
		mt.Perm = metastore.PermRead
	case model.PermWrite:
		mt.Perm = metastore.PermWrite
	case model.PermNone:
		mt.Perm = 0
	default:
		mt.Perm = metastore.PermReadWrite
	}
	return mt
}

func toModelGroup(g metastore.Group) model.Group {
	mg := model.Group{Name: g.Name, FIFO: g.FIFO, MaxDeliveryAttempts: g.MaxDeliveryAttempts, CreateTime: time.UnixMilli(g.CreateTime)}
	if mg.MaxDeliveryAttempts <= 0 {
		mg.MaxDeliveryAttempts = model.DefaultMaxDeliveryAttempts
	}
	rp := g.RetryPolicy
	if len(rp.Customized) > 0 || rp.Initial == 0 {
		mg.Retry = model.RetryPolicy{Kind: model.RetryCustomized, Steps: append([]time.Duration(nil), rp.Customized...)}
		if len(mg.Retry.Steps) == 0 {
			mg.Retry = model.DefaultRetryPolicy()
		}
	} else {
		mg.Retry = model.RetryPolicy{Kind: model.RetryExponential, Initial: rp.Initial, Max: rp.Max, Multiplier: rp.Multiplier}
	}
	return mg
}

func toMetaGroup(g model.Group) metastore.Group {
	mg := metastore.Group{Name: g.Name, FIFO: g.FIFO, MaxDeliveryAttempts: g.MaxDeliveryAttempts, CreateTime: g.CreateTime.UnixMilli()}
	if g.Retry.Kind == model.RetryExponential {
		mg.RetryPolicy = metastore.RetryPolicy{Initial: g.Retry.Initial, Max: g.Retry.Max, Multiplier: g.Retry.Multiplier}
	} else {
		steps := g.Retry.Steps
		if len(steps) == 0 {
			steps = model.DefaultCustomizedSteps
		}
		mg.RetryPolicy = metastore.RetryPolicy{Customized: append([]time.Duration(nil), steps...)}
	}
	return mg
}

// CreateTopic creates a topic. Zero Type means NORMAL, zero Queues the
// default.
func (s *Service) CreateTopic(ctx context.Context, t model.Topic) (model.Topic, error) {
	if err := validateCreatableTopic(t.Name); err != nil {
		return model.Topic{}, err
	}
	if t.Type == 0 {
		t.Type = model.TopicNormal
	}
	if t.Queues == 0 {
		t.Queues = s.cfg.DefaultQueues
	}
	if t.Queues < 0 || t.Queues > MaxQueues {
		return model.Topic{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q: queue count %d is outside 1..%d", t.Name, t.Queues, MaxQueues)
	}
	if _, ok := topicTypeValid[t.Type]; !ok {
		return model.Topic{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q: unknown type %v", t.Name, t.Type)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.caughtUp(ctx); err != nil {
		return model.Topic{}, err
	}
	if _, ok := s.store.Topic(t.Name); ok {
		return model.Topic{}, mqerr.Errorf(mqerr.KindAlreadyExists, "topic %q already exists", t.Name)
	}
	return s.putTopicLocked(t)
}

var topicTypeValid = map[model.TopicType]struct{}{
	model.TopicNormal: {}, model.TopicFIFO: {}, model.TopicDelay: {}, model.TopicTransaction: {}, model.TopicMixed: {},
	model.TopicLite: {},
}

// AttrLiteTTL is the topic attribute holding a LITE topic's lite topic
// expiry (a Go duration; negative: never).
const AttrLiteTTL = "lite.ttl"

func (s *Service) putTopicLocked(t model.Topic) (model.Topic, error) {
	t.CreateTime = s.cfg.Clock.Now().Truncate(time.Millisecond)
	if err := s.store.PutTopic(toMetaTopic(t)); err != nil {
		return model.Topic{}, storeErr(err, "topic "+t.Name)
	}
	return t, nil
}

// GetTopic returns an existing topic (KindTopicNotFound otherwise). A
// group's dead-letter topic exists as soon as the group does.
func (s *Service) GetTopic(ctx context.Context, name string) (model.Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return model.Topic{}, err
	}
	if t, ok := s.lookup(name); ok {
		return toModelTopic(t), nil
	}
	if g, ok := strings.CutPrefix(name, DLQPrefix); ok {
		if _, exists := s.store.Group(g); exists {
			return s.EnsureDLQ(ctx, g)
		}
	}
	return model.Topic{}, mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist (create it with `mqgate topic create %s`)", name, name)
}

// lookup is the stored topic name, unless it is being deleted.
func (s *Service) lookup(name string) (metastore.Topic, bool) {
	if _, ok := s.deleting.Load(name); ok {
		return metastore.Topic{}, false
	}
	return s.store.Topic(name)
}

// Topic returns a topic, creating a NORMAL one when auto-create is on.
func (s *Service) Topic(ctx context.Context, name string) (model.Topic, error) {
	t, err := s.GetTopic(ctx, name)
	if err == nil || !s.cfg.AutoCreate || mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		return t, err
	}
	if err := validateCreatableTopic(name); err != nil {
		return model.Topic{}, err
	}
	t, created, err := s.ensureNormal(name, s.cfg.DefaultQueues)
	if created {
		s.cfg.Logger.Warn("auto-create: created a topic on first use; if the name is a typo, delete it with `mqgate topic delete`",
			"topic", name, "type", t.Type.String(), "queues", t.Queues)
	}
	return t, err
}

// ensureNormal returns topic name, creating it as a NORMAL topic with
// queues queues if it does not exist (checked again under the lock, so
// concurrent callers create it once); created says this call created it.
func (s *Service) ensureNormal(name string, queues int32) (t model.Topic, created bool, err error) {
	if t, ok := s.lookup(name); ok {
		return toModelTopic(t), false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.lookup(name); ok {
		return toModelTopic(t), false, nil
	}
	t, err = s.putTopicLocked(model.Topic{Name: name, Type: model.TopicNormal, Queues: queues})
	return t, err == nil, err
}

// EnsureDLQ returns the group's dead-letter topic, creating it (NORMAL,
// one queue, or Config.DLQQueues) on first use, and giving it
// Config.DLQQueues if it has fewer.
func (s *Service) EnsureDLQ(ctx context.Context, group string) (model.Topic, error) {
	want := max(s.cfg.DLQQueues, 1)
	t, _, err := s.ensureNormal(DLQTopic(group), want)
	if err != nil || t.Queues >= want {
		return t, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.caughtUp(ctx); err != nil {
		return model.Topic{}, err
	}
	if cur, ok := s.store.Topic(t.Name); ok && cur.QueueCount < want {
		cur.QueueCount = want
		if err := s.store.PutTopic(cur); err != nil {
			return model.Topic{}, storeErr(err, "topic "+t.Name)
		}
		return toModelTopic(cur), nil
	}
	return t, nil
}

// ListTopics returns every topic sorted by name.
func (s *Service) ListTopics(ctx context.Context) ([]model.Topic, error) {
	ts := s.store.Topics()
	out := make([]model.Topic, 0, len(ts))
	for _, t := range ts {
		out = append(out, toModelTopic(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteTopic deletes a topic and its queues.
func (s *Service) DeleteTopic(ctx context.Context, name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.store.Topic(name); !ok {
		return mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist", name)
	}
	// The queues are dropped before the topic is removed: a crash (or an
	// error) between the two leaves the topic there with empty queues,
	// and deleting it again finishes. The other order would leave queues
	// without a topic, whose messages a topic created again under the
	// name would deliver.
	s.deleting.Store(name, struct{}{})
	defer s.deleting.Delete(name)
	if s.drop != nil {
		if err := s.drop.DeleteTopic(ctx, name); err != nil {
			return storeErr(err, "queues of topic "+name)
		}
	}
	if err := s.store.DeleteTopic(name); err != nil {
		return storeErr(err, "topic deletion "+name)
	}
	for _, f := range s.onTopicDeleted {
		f(name)
	}
	return nil
}

// CreateGroup creates a consumer group.
func (s *Service) CreateGroup(ctx context.Context, g model.Group) (model.Group, error) {
	if err := ValidateGroupName(g.Name); err != nil {
		return model.Group{}, err
	}
	if g.MaxDeliveryAttempts == 0 {
		g.MaxDeliveryAttempts = model.DefaultMaxDeliveryAttempts
	}
	if g.MaxDeliveryAttempts < 1 || g.MaxDeliveryAttempts > MaxAttempts {
		return model.Group{}, mqerr.Errorf(mqerr.KindBadRequest, "group %q: max delivery attempts %d is outside 1..%d", g.Name, g.MaxDeliveryAttempts, MaxAttempts)
	}
	if g.Retry.Kind == model.RetryCustomized && len(g.Retry.Steps) == 0 {
		g.Retry = model.DefaultRetryPolicy()
	}
	if g.Retry.Kind == model.RetryExponential && (g.Retry.Initial <= 0 || g.Retry.Max < g.Retry.Initial || g.Retry.Multiplier < 1) {
		return model.Group{}, mqerr.Errorf(mqerr.KindBadRequest, "group %q: exponential retry needs initial > 0, max ≥ initial, multiplier ≥ 1", g.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.caughtUp(ctx); err != nil {
		return model.Group{}, err
	}
	if _, ok := s.store.Group(g.Name); ok {
		return model.Group{}, mqerr.Errorf(mqerr.KindAlreadyExists, "consumer group %q already exists", g.Name)
	}
	return s.putGroupLocked(g)
}

func (s *Service) putGroupLocked(g model.Group) (model.Group, error) {
	g.CreateTime = s.cfg.Clock.Now().Truncate(time.Millisecond)
	if err := s.store.PutGroup(toMetaGroup(g)); err != nil {
		return model.Group{}, storeErr(err, "group "+g.Name)
	}
	return g, nil
}

// GetGroup returns an existing group (KindGroupNotFound otherwise).
func (s *Service) GetGroup(ctx context.Context, name string) (model.Group, error) {
	if err := ValidateGroupName(name); err != nil {
		return model.Group{}, err
	}
	if g, ok := s.store.Group(name); ok {
		return toModelGroup(g), nil
	}
	return model.Group{}, mqerr.Errorf(mqerr.KindGroupNotFound, "consumer group %q does not exist (create it with `mqgate group create %s`)", name, name)
}

// Group returns a group, creating it with defaults when auto-create is on.
func (s *Service) Group(ctx context.Context, name string) (model.Group, error) {
	g, err := s.GetGroup(ctx, name)
	if err == nil || !s.cfg.AutoCreate || mqerr.KindOf(err) != mqerr.KindGroupNotFound {
		return g, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mg, ok := s.store.Group(name); ok {
		return toModelGroup(mg), nil
	}
	g, err = s.putGroupLocked(model.Group{Name: name, MaxDeliveryAttempts: model.DefaultMaxDeliveryAttempts, Retry: model.DefaultRetryPolicy()})
	if err == nil {
		s.cfg.Logger.Warn("auto-create: created a consumer group on first use; if the name is a typo, delete it with `mqgate group delete`",
			"group", name)
	}
	return g, err
}

// ListGroups returns every group sorted by name.
func (s *Service) ListGroups(ctx context.Context) ([]model.Group, error) {
	gs := s.store.Groups()
	out := make([]model.Group, 0, len(gs))
	for _, g := range gs {
		out = append(out, toModelGroup(g))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteGroup deletes a group (its dead-letter topic stays readable).
func (s *Service) DeleteGroup(ctx context.Context, name string) error {
	if err := ValidateGroupName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.store.Group(name); !ok {
		return mqerr.Errorf(mqerr.KindGroupNotFound, "consumer group %q does not exist", name)
	}
	if err := s.store.DeleteGroup(name); err != nil {
		return storeErr(err, "group deletion "+name)
	}
	for _, f := range s.onGroupDeleted {
		f(name)
	}
	return nil
}
