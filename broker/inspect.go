package broker

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker/delay"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/storage/message"
)

// This file is the read-only inspection side of the facade (operators'
// `topic describe`, `group describe`, `message show`): queue offsets from
// the store, consumption progress from PopStats, lookups through the
// store's id/key index. Nothing here changes state.

// QueueOffsets are the stored range of one queue: [Min, Max).
type QueueOffsets struct {
	QueueID  int32
	Min, Max int64
}

// GroupQueueProgress is how far a group read one queue.
type GroupQueueProgress struct {
	QueueID int32
	// Consumed is the first offset the group has not read yet.
	Consumed int64
	Max      int64
	// Ready = Max − Consumed: never delivered to the group.
	Ready int64
}

// GroupTopicProgress is a group's progress in one topic.
type GroupTopicProgress struct {
	Group, Topic string
	Ready        int64
	// InFlight: delivered, not acked (invisible, or due for redelivery).
	InFlight int64
	// Held: FIFO messages read but waiting behind their message group.
	Held int64
	// Backlog = Ready + InFlight + Held.
	Backlog int64
	Queues  []GroupQueueProgress
}

// TopicDescription is DescribeTopic's answer.
type TopicDescription struct {
	Topic    model.Topic
	Queues   []QueueOffsets
	Messages int64
	Groups   []GroupTopicProgress
}

// DeadLetterInfo describes a group's %DLQ% topic.
type DeadLetterInfo struct {
	Topic    string
	Exists   bool
	Messages int64
}

// GroupDescription is DescribeGroup's answer.
type GroupDescription struct {
	Group  model.Group
	Topics []GroupTopicProgress
	DLQ    DeadLetterInfo
}

// DescribeTopic returns a topic's queue offsets and the progress of every
// group that has received from it. It never auto-creates.
func (b *Broker) DescribeTopic(ctx context.Context, name string) (TopicDescription, error) {
	t, err := b.s().meta.GetTopic(ctx, name)
	if err != nil {
		return TopicDescription{}, err
	}
	d := TopicDescription{Topic: t}
	d.Queues, d.Messages = b.queueOffsets(t)
	popped := map[string]bool{}
	for _, st := range b.s().pop.Stats() {
		if st.Topic == t.Name {
			d.Groups = append(d.Groups, b.progress(t, st.Group, st.Next, st.InFlight, st.Held))
			popped[st.Group] = true
		}
	}
	// Groups that only commit offsets (classic and offset-API consumers).
	gs, err := b.s().meta.ListGroups(ctx)
	if err != nil {
		return TopicDescription{}, err
	}
	for _, g := range gs {
		if offs := b.committedIn(g.Name)[t.Name]; len(offs) > 0 && !popped[g.Name] {
			d.Groups = append(d.Groups, b.progress(t, g.Name, offs, 0, 0))
		}
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	return d, nil
}

// committedIn returns a group's committed offsets by topic and queue.
func (b *Broker) committedIn(group string) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for k, off := range b.store.Meta().Offsets(group) {
		if out[k.Topic] == nil {
			out[k.Topic] = map[int32]int64{}
		}
		out[k.Topic][k.QueueID] = off
	}
	return out
}

// DescribeGroup returns a group's progress in every topic it has received
// from and the size of its dead-letter topic. It never auto-creates.
func (b *Broker) DescribeGroup(ctx context.Context, name string) (GroupDescription, error) {
	g, err := b.s().meta.GetGroup(ctx, name)
	if err != nil {
		return GroupDescription{}, err
	}
	d := GroupDescription{Group: g, DLQ: DeadLetterInfo{Topic: metadata.DLQTopic(g.Name)}}
	popped := map[string]bool{}
	for _, st := range b.s().pop.Stats() {
		if st.Group != g.Name {
			continue
		}
		t, err := b.s().meta.GetTopic(ctx, st.Topic)
		if err != nil {
			continue // deleted since; its state is being dropped
		}
		d.Topics = append(d.Topics, b.progress(t, g.Name, st.Next, st.InFlight, st.Held))
		popped[t.Name] = true
	}
	// Topics it only commits offsets in (classic and offset-API consumers).
	for name, offs := range b.committedIn(g.Name) {
		if popped[name] {
			continue
		}
		if t, err := b.s().meta.GetTopic(ctx, name); err == nil {
			d.Topics = append(d.Topics, b.progress(t, g.Name, offs, 0, 0))
		}
	}
	sort.Slice(d.Topics, func(i, j int) bool { return d.Topics[i].Topic < d.Topics[j].Topic })
	switch dt, err := b.s().meta.GetTopic(ctx, d.DLQ.Topic); {
	case err == nil:
		d.DLQ.Exists = true
		_, d.DLQ.Messages = b.queueOffsets(dt)
	case mqerr.KindOf(err) != mqerr.KindTopicNotFound:
		return GroupDescription{}, err
	}
	return d, nil
}

func (b *Broker) queueOffsets(t model.Topic) ([]QueueOffsets, int64) {
	out := make([]QueueOffsets, 0, t.Queues)
	var total int64
	for q := int32(0); q < t.Queues; q++ {
		lo, hi := b.store.QueueRange(t.Name, q)
		out = append(out, QueueOffsets{QueueID: q, Min: lo, Max: hi})
		total += hi - lo
	}
	return out, total
}

// progress folds one POP subscription's positions into per-queue counts.
// A queue the group never read starts at the queue's min offset (pop's
// start position), and a position retention overtook counts from min.
func (b *Broker) progress(t model.Topic, group string, next map[int32]int64, inFlight, held int) GroupTopicProgress {
	p := GroupTopicProgress{Group: group, Topic: t.Name, InFlight: int64(inFlight), Held: int64(held)}
	for q := int32(0); q < t.Queues; q++ {
		lo, hi := b.store.QueueRange(t.Name, q)
		c, ok := next[q]
		if !ok || c < lo {
			c = lo
		}
		ready := max(hi-c, 0)
		p.Queues = append(p.Queues, GroupQueueProgress{QueueID: q, Consumed: c, Max: hi, Ready: ready})
		p.Ready += ready
	}
	p.Backlog = p.Ready + p.InFlight + p.Held
	return p
}

// LookupRequest finds stored messages by client message id or key.
type LookupRequest struct {
	// Topic to search; empty means every topic.
	Topic string
	// ID and Key: a record matching either is returned (at least one).
	ID, Key string
	// Max results (≤ 0: 32; capped at MaxLookup).
	Max int
}

// MaxLookup caps one lookup.
const MaxLookup = 256

// FoundMessage is one lookup hit.
type FoundMessage struct {
	model.Delivered
	// Scheduled: a delayed message still in the delay stage (not due yet,
	// or recalled); QueueID/QueueOffset are then the stage's.
	Scheduled bool
	// Groups says where the message stands for each consumer group that
	// consumed its queue, by name (none for a scheduled message).
	Groups []GroupState
}

// GroupState is where a stored message stands for one consumer group: a
// POP state (pop.StateInFlight and the others) for a group that receives,
// or, for one that pulls and commits offsets, StateConsumed or
// StateNotConsumed.
type GroupState struct {
	Group   string
	State   string
	Attempt uint32    // the delivery attempt in flight or awaiting redelivery
	Until   time.Time // when an in-flight message becomes visible again
}

// States of a message for a group that commits offsets.
const (
	StateConsumed    = "CONSUMED"     // the group's committed offset is past it
	StateNotConsumed = "NOT_CONSUMED" // its committed offset is not
)

// groupStates says where the message at (t, q, off) stands for each group
// that received from or committed an offset in that queue.
func (b *Broker) groupStates(ctx context.Context, t model.Topic, q int32, off int64) []GroupState {
	gs, err := b.s().meta.ListGroups(ctx)
	if err != nil {
		return nil
	}
	var out []GroupState
	for _, g := range gs {
		if st, ok := b.s().pop.StateOf(g.Name, t.Name, q, off); ok {
			out = append(out, GroupState{Group: g.Name, State: st.State, Attempt: st.Attempt, Until: st.VisibleAt})
			continue
		}
		if committed, err := b.s().offs.Get(t, g.Name, q); err == nil {
			st := StateNotConsumed
			if committed > off {
				st = StateConsumed
			}
			out = append(out, GroupState{Group: g.Name, State: st})
		}
	}
	return out
}

// LookupMessage finds messages by id or key, newest first. Delayed
// messages not yet delivered are found in the delay stage and reported
// Scheduled; once delivered only the topic's copy is returned.
func (b *Broker) LookupMessage(ctx context.Context, req LookupRequest) ([]FoundMessage, error) {
	if strings.TrimSpace(req.ID) == "" && strings.TrimSpace(req.Key) == "" {
		return nil, mqerr.Errorf(mqerr.KindBadRequest, "a message id or a key is required")
	}
	if req.Max <= 0 {
		req.Max = 32
	}
	req.Max = min(req.Max, MaxLookup)
	var topics []string
	if req.Topic != "" {
		if err := metadata.ValidateTopicName(req.Topic); err != nil {
			return nil, err
		}
		t, err := b.s().meta.GetTopic(ctx, req.Topic)
		if err != nil {
			return nil, err
		}
		topics = []string{t.Name}
	} else {
		ts, err := b.s().meta.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			topics = append(topics, t.Name)
		}
	}
	want := make(map[string]bool, len(topics))
	for _, t := range topics {
		want[t] = true
	}
	type key struct {
		topic string
		queue int32
		off   int64
	}
	seen := map[key]bool{}
	delivered := map[string]bool{} // topic + "\x00" + id found in its topic
	var out []FoundMessage
	add := func(ms []*message.Message, scheduled bool) {
		for _, m := range ms {
			k := key{m.Topic, m.QueueID, m.QueueOffset}
			if seen[k] {
				continue
			}
			seen[k] = true
			d := record.FromRecord(m)
			if scheduled && (!want[d.Topic] || delivered[d.Topic+"\x00"+d.ID]) {
				continue
			}
			if !scheduled {
				delivered[d.Topic+"\x00"+d.ID] = true
			}
			out = append(out, FoundMessage{Delivered: *d, Scheduled: scheduled})
		}
	}
	search := func(topic string) error {
		if req.ID != "" {
			ms, err := b.store.LookupByID(topic, req.ID, req.Max)
			if err != nil {
				return mqerr.Wrap(mqerr.KindInternal, err, "looking up message id in "+topic)
			}
			add(ms, topic == delay.StageTopic)
		}
		if req.Key != "" {
			ms, err := b.store.LookupByKey(topic, req.Key, 0, b.cfg.Clock.Now().Add(24*time.Hour).UnixMilli(), req.Max)
			if err != nil {
				return mqerr.Wrap(mqerr.KindInternal, err, "looking up message key in "+topic)
			}
			add(ms, topic == delay.StageTopic)
		}
		return nil
	}
	for _, t := range topics {
		if err := ctx.Err(); err != nil {
			return nil, mqerr.Wrap(mqerr.KindCanceled, err, "message lookup")
		}
		if err := search(t); err != nil {
			return nil, err
		}
	}
	// Delayed messages wait in the stage topic, indexed under its name.
	if err := search(delay.StageTopic); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTime.After(out[j].StoreTime) })
	if len(out) > req.Max {
		out = out[:req.Max]
	}
	for i := range out {
		if out[i].Scheduled {
			continue
		}
		if t, err := b.s().meta.GetTopic(ctx, out[i].Topic); err == nil && t.Type != model.TopicLite {
			out[i].Groups = b.groupStates(ctx, t, out[i].QueueID, out[i].QueueOffset)
		}
	}
	return out, nil
}

// ConsumeStat is a group's progress in one queue, as classic admin tools
// show it (GET_CONSUME_STATS).
type ConsumeStat struct {
	Topic   string
	QueueID int32
	// BrokerOffset is the queue's end (the next offset written).
	BrokerOffset int64
	// ConsumerOffset is where the group stands: its committed offset,
	// else its first message in flight or never read by POP receives,
	// else (never consumed) the queue's first offset.
	ConsumerOffset int64
	// LastTimestamp is the store time (Unix ms) of the message before
	// ConsumerOffset, 0 when there is none to read.
	LastTimestamp int64
}

// ConsumeStats reports a group's progress on every queue of topic, or,
// when topic is "", of every topic the group has committed offsets in or
// received from. The group must exist; a named topic too.
func (b *Broker) ConsumeStats(ctx context.Context, group, topic string) ([]ConsumeStat, error) {
	g, err := b.s().meta.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	names := []string{topic}
	if topic == "" {
		names = b.consumedTopics(g.Name)
	}
	var out []ConsumeStat
	for _, n := range names {
		t, err := b.s().meta.GetTopic(ctx, n)
		if err != nil {
			if topic == "" && mqerr.KindOf(err) == mqerr.KindTopicNotFound {
				continue // deleted since the group consumed it
			}
			return nil, err
		}
		for q := int32(0); q < t.Queues; q++ {
			lo, hi := b.store.QueueRange(t.Name, q)
			cs := ConsumeStat{Topic: t.Name, QueueID: q, BrokerOffset: hi, ConsumerOffset: b.position(t, g.Name, q)}
			if at := cs.ConsumerOffset - 1; at >= lo && at < hi {
				if ms, _, err := b.store.ReadMessages(t.Name, q, at, 1); err == nil && len(ms) == 1 {
					cs.LastTimestamp = ms[0].StoreTime
				}
			}
			out = append(out, cs)
		}
	}
	return out, nil
}

// consumedTopics lists the topics group has committed offsets in or POP
// state for, sorted.
func (b *Broker) consumedTopics(group string) []string {
	seen := map[string]bool{}
	for topic := range b.committedIn(group) {
		seen[topic] = true
	}
	for _, st := range b.s().pop.Stats() {
		if st.Group == group {
			seen[st.Topic] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GroupTopics lists the topics a group consumes (committed offsets or
// POP receives), for classic admin tools; the group must exist.
func (b *Broker) GroupTopics(ctx context.Context, group string) ([]string, error) {
	g, err := b.s().meta.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	return b.consumedTopics(g.Name), nil
}

// TopicGroups lists the groups that consume a topic (committed offsets or
// POP receives), sorted: the groups DescribeTopic describes.
func (b *Broker) TopicGroups(ctx context.Context, topic string) ([]string, error) {
	d, err := b.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(d.Groups))
	for _, g := range d.Groups {
		out = append(out, g.Group)
	}
	return out, nil
}

// RuntimeStats are the broker-wide figures classic admin tools read
// (GET_BROKER_RUNTIME_INFO).
type RuntimeStats struct {
	Started time.Time
	// Put and Get count messages stored from producers and delivered to
	// consumers since Open, over every listener (0 without a
	// MeterProvider: the counters are the metrics').
	Put, Get int64
	// LogMin and Written bound the commit log; FlushLag is what is
	// written and not yet fsynced (bytes).
	LogMin, Written, FlushLag int64
	// EarliestStoreTime is the store time (Unix ms) of the oldest
	// retained record, 0 when the log is empty.
	EarliestStoreTime int64
	// DiskTotal and DiskFree describe the data directory's file system
	// (bytes; zero when unknown).
	DiskTotal, DiskFree uint64
}

// Started is when the broker was opened: its counters (MessageTotals,
// TopicTraffic, DeliveredCounts) count from then.
func (b *Broker) Started() time.Time { return b.started }

// MessageTotals returns RuntimeStats' Put and Get alone.
func (b *Broker) MessageTotals() (put, get int64) { return b.obs.totals() }

// GroupTopic names what a consumer group consumes from one topic.
type GroupTopic struct{ Group, Topic string }

// DeliveredCounts returns how many messages each group has been given from
// each topic since the broker started (POP receives and pulls alike), for
// consumption rates; empty when the broker counts nothing (no Meters).
func (b *Broker) DeliveredCounts() map[GroupTopic]int64 {
	out := map[GroupTopic]int64{}
	b.obs.delivered(func(group, topic string, n int64) { out[GroupTopic{group, topic}] = n })
	return out
}

// RuntimeStats returns the broker's runtime figures.
func (b *Broker) RuntimeStats() RuntimeStats {
	st := b.store.Stats()
	r := RuntimeStats{Started: b.started, LogMin: st.LogMin, Written: st.Written, FlushLag: st.FlushLag}
	r.Put, r.Get = b.obs.totals()
	if r.Written > r.LogMin {
		if m, err := b.store.ReadMessageAt(r.LogMin); err == nil {
			r.EarliestStoreTime = m.StoreTime
		}
	}
	if u, err := b.store.DiskUsage(); err == nil {
		r.DiskTotal, r.DiskFree = u.Total, u.Free
	}
	return r
}

// TopicTraffic is what producers sent to one topic since the broker
// started.
type TopicTraffic struct {
	Topic string
	// Messages and Bytes (bodies) stored from producers.
	Messages, Bytes int64
}

// TopicTraffic returns every topic's sends since start, sorted by topic;
// empty when the broker counts nothing (no Meters).
func (b *Broker) TopicTraffic() []TopicTraffic {
	var out []TopicTraffic
	b.obs.topics.Range(func(k, v any) bool {
		c := v.(*attrCache)
		out = append(out, TopicTraffic{Topic: k.(string), Messages: c.msgs.Load(), Bytes: c.bytes.Load()})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// StoredMessages returns how many messages each queue of topic holds
// summed ([min, max) of every queue), without describing its groups.
func (b *Broker) StoredMessages(ctx context.Context, topic string) (int64, error) {
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	_, n := b.queueOffsets(t)
	return n, nil
}

// BrowseRequest reads a queue's stored messages from an offset or a time.
type BrowseRequest struct {
	Topic   string
	QueueID int32
	// Offset is the first offset to read when Time is zero; below the
	// queue's min it starts at the min, past its max it reads nothing.
	Offset int64
	// Time, when set, starts at the first message stored at or after it
	// (the queue's end when none is).
	Time time.Time
	// Max messages (≤ 0: 32; capped at MaxBrowse).
	Max int
}

// MaxBrowse caps one BrowseQueue.
const MaxBrowse = 256

// BrowsePage is BrowseQueue's answer.
type BrowsePage struct {
	// Min and Max are the queue's retained range [Min, Max).
	Min, Max int64
	// Start is the offset the page starts at; Next the one after its last
	// message (Start when it is empty).
	Start, Next int64
	Messages    []*model.Delivered
}

// BrowseQueue reads stored messages of one queue in offset order, as
// they are stored, whoever consumed them. It changes nothing and never
// auto-creates.
func (b *Broker) BrowseQueue(ctx context.Context, req BrowseRequest) (BrowsePage, error) {
	if err := metadata.ValidateTopicName(req.Topic); err != nil {
		return BrowsePage{}, err
	}
	t, err := b.s().meta.GetTopic(ctx, req.Topic)
	if err != nil {
		return BrowsePage{}, err
	}
	if req.QueueID < 0 || req.QueueID >= t.Queues {
		return BrowsePage{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q has queues 0 to %d, not %d", t.Name, t.Queues-1, req.QueueID)
	}
	if req.Max <= 0 {
		req.Max = 32
	}
	req.Max = min(req.Max, MaxBrowse)
	lo, hi := b.store.QueueRange(t.Name, req.QueueID)
	page := BrowsePage{Min: lo, Max: hi}
	from := req.Offset
	if !req.Time.IsZero() {
		if from, err = b.s().offs.Query(t, req.QueueID, offset.Timestamp, req.Time); err != nil {
			return page, err
		}
	}
	from = min(max(from, lo), hi)
	page.Start, page.Next = from, from
	if from == hi {
		return page, nil
	}
	res, err := b.s().offs.Pull(ctx, t, req.QueueID, from, req.Max, model.Filter{}, 0)
	if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		return page, err
	}
	page.Messages, page.Next = res.Messages, res.Next
	if res.Min > page.Min { // retention moved past from meanwhile
		page.Min = res.Min
	}
	page.Max = max(page.Max, res.Max)
	return page, nil
}

// InFlightMessage is a message a group was given and has not
// acknowledged (or holds back behind its FIFO message group).
type InFlightMessage struct {
	model.Delivered
	// Deliveries is how many times it was delivered.
	Deliveries int32
	// VisibleAt: while in flight its deadline; past it, when it is due
	// for redelivery.
	VisibleAt time.Time
	Held      bool
}

// OldestInFlight returns the message group has in flight in topic that
// was stored first; ok is false when it has none. It changes nothing.
func (b *Broker) OldestInFlight(ctx context.Context, group, topic string) (m InFlightMessage, ok bool, err error) {
	t, err := b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return m, false, err
	}
	for _, f := range b.s().pop.OldestInFlight(group, t.Name) {
		ms, _, err := b.store.ReadMessages(t.Name, f.Queue, f.Offset, 1)
		if err != nil || len(ms) == 0 {
			continue // retention removed it meanwhile
		}
		d := record.FromRecord(ms[0])
		if ok && !d.StoreTime.Before(m.StoreTime) {
			continue
		}
		m, ok = InFlightMessage{Delivered: *d, Deliveries: int32(f.Deliveries), VisibleAt: f.VisibleAt, Held: f.Held}, true
	}
	return m, ok, nil
}
