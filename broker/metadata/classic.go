package metadata

import (
	"context"
	"strings"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

// This file holds what the classic remoting protocol needs beyond the
// create-only API: its admin codes upsert, and its consumers own a
// %RETRY%<group> topic.

// RetryTopic names a group's classic retry topic.
func RetryTopic(group string) string { return RetryPrefix + group }

// EnsureRetry returns the group's classic retry topic (%RETRY%<group>),
// creating it (one queue, NORMAL) on first use.
func (s *Service) EnsureRetry(ctx context.Context, group string) (model.Topic, error) {
	if err := ValidateGroupName(group); err != nil {
		return model.Topic{}, err
	}
	t, _, err := s.ensureNormal(RetryTopic(group), 1)
	return t, err
}

// PutTopic creates a topic or changes an existing one's queue count,
// permission and type, keeping its creation time. It reports whether the
// topic was created.
func (s *Service) PutTopic(ctx context.Context, t model.Topic) (model.Topic, bool, error) {
	if err := validateCreatableTopic(t.Name); err != nil {
		return model.Topic{}, false, err
	}
	if t.Type == 0 {
		t.Type = model.TopicNormal
	}
	if t.Queues == 0 {
		t.Queues = s.cfg.DefaultQueues
	}
	if t.Queues < 0 || t.Queues > MaxQueues {
		return model.Topic{}, false, mqerr.Errorf(mqerr.KindBadRequest, "topic %q: queue count %d is outside 1..%d", t.Name, t.Queues, MaxQueues)
	}
	if _, ok := topicTypeValid[t.Type]; !ok {
		return model.Topic{}, false, mqerr.Errorf(mqerr.KindBadRequest, "topic %q: unknown type %v", t.Name, t.Type)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.caughtUp(ctx); err != nil {
		return model.Topic{}, false, err
	}
	old, ok := s.store.Topic(t.Name)
	if !ok {
		nt, err := s.putTopicLocked(t)
		return nt, true, err
	}
	cur := toModelTopic(old)
	if cur.Queues == t.Queues && cur.Perm == t.Perm && cur.Type == t.Type {
		return cur, false, nil
	}
	t.CreateTime = cur.CreateTime
	if err := s.store.PutTopic(toMetaTopic(t)); err != nil {
		return model.Topic{}, false, storeErr(err, "topic "+t.Name)
	}
	return t, false, nil
}

// PutGroup creates a group or replaces an existing one's settings,
// keeping its creation time.
func (s *Service) PutGroup(ctx context.Context, g model.Group) (model.Group, error) {
	if err := ValidateGroupName(g.Name); err != nil {
		return model.Group{}, err
	}
	if strings.HasPrefix(g.Name, RetryPrefix) || strings.HasPrefix(g.Name, DLQPrefix) {
		return model.Group{}, mqerr.Errorf(mqerr.KindIllegalGroup, "consumer group name %q uses a prefix mqgate manages", g.Name)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.caughtUp(ctx); err != nil {
		return model.Group{}, err
	}
	old, ok := s.store.Group(g.Name)
	if !ok {
		return s.putGroupLocked(g)
	}
	g.CreateTime = toModelGroup(old).CreateTime
	if err := s.store.PutGroup(toMetaGroup(g)); err != nil {
		return model.Group{}, storeErr(err, "group "+g.Name)
	}
	return g, nil
}

// EnsureGroup returns a group, creating it with defaults when it does
// not exist — whatever the auto-create setting: classic consumers never
// create their groups explicitly (upstream's autoCreateSubscriptionGroup).
func (s *Service) EnsureGroup(ctx context.Context, name string) (model.Group, error) {
	g, err := s.GetGroup(ctx, name)
	if err == nil || mqerr.KindOf(err) != mqerr.KindGroupNotFound {
		return g, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mg, ok := s.store.Group(name); ok {
		return toModelGroup(mg), nil
	}
	return s.putGroupLocked(model.Group{Name: name, MaxDeliveryAttempts: model.DefaultMaxDeliveryAttempts, Retry: model.DefaultRetryPolicy()})
}

// IsSystemTopic reports whether name is reserved for the system (upstream
// system topics and mqgate's rmq_sys_ topics): clients may not send there.
func IsSystemTopic(name string) bool {
	return systemTopics[name] || strings.HasPrefix(strings.ToLower(name), SystemTopicPrefix)
}
