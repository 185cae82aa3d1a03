package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// heartbeatData is HEART_BEAT's body. Fields whose
// type differs between clients (codeSet: strings from Go, numbers from
// Java) are kept raw and ignored.
type heartbeatData struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []consumerData `json:"consumerDataSet"`
	WithoutSub      bool           `json:"withoutSub"`
}

type consumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
}

type subscriptionData struct {
	Topic          string          `json:"topic"`
	SubString      string          `json:"subString"`
	ExpressionType string          `json:"expressionType"`
	TagsSet        json.RawMessage `json:"tagsSet"`
	CodeSet        json.RawMessage `json:"codeSet"`
	SubVersion     json.RawMessage `json:"subVersion"`
}

// maxHeartbeatGroups bounds the groups one heartbeat may register.
const maxHeartbeatGroups = 1024

// decodeHeartbeat parses and checks a HEART_BEAT body (empty: an empty
// heartbeat, which Java may send).
func decodeHeartbeat(body []byte) (*heartbeatData, error) {
	var hb heartbeatData
	if len(body) > 0 {
		if err := json.Unmarshal(body, &hb); err != nil {
			return nil, fmt.Errorf("heartbeat body is not HeartbeatData JSON: %w", err)
		}
	}
	if hb.ClientID == "" && (len(hb.ProducerDataSet) > 0 || len(hb.ConsumerDataSet) > 0) {
		return nil, errors.New("heartbeat without clientID")
	}
	if len(hb.ProducerDataSet)+len(hb.ConsumerDataSet) > maxHeartbeatGroups {
		return nil, fmt.Errorf("heartbeat names %d groups, at most %d", len(hb.ProducerDataSet)+len(hb.ConsumerDataSet), maxHeartbeatGroups)
	}
	return &hb, nil
}

// member is one client instance in one group.
type member struct {
	clientID string
	conn     *conn
	seen     time.Time
	// user signed the registration (nil with auth off): a producer is
	// asked about a transaction only if it may publish to its topic.
	user *auth.User
	// since is the member's first heartbeat on this connection.
	since time.Time
	// language and version the client's heartbeat frames carry
	language string
	version  int32
	// consumers only
	model, from, consumeType string
	subs                     map[string]subscriptionData
}

// registry tracks classic clients by group: consumer lists for
// rebalancing, subscriptions for pulls, producer connections for
// transaction checks. Members leave when their connection closes (Go
// never unregisters) or after ClientExpiry without a heartbeat. It is
// separate from gateway/session, the gRPC clients' registry, which keys
// one record per client id with its v2 Settings and Telemetry stream and
// knows nothing of groups' members or connections (see doc.go).
type registry struct {
	s         *Server
	mu        sync.Mutex
	consumers map[string]map[string]*member
	producers map[string]map[string]*member
	// requesters: the connection each request/reply requester (by the
	// REPLY_TO_CLIENT of its requests) last sent a request on. The Go
	// client can send its first request before its first heartbeat.
	requesters map[string]*member
	members    int // entries of the three maps
}

func newRegistry(s *Server) *registry {
	return &registry{s: s, consumers: make(map[string]map[string]*member), producers: make(map[string]map[string]*member),
		requesters: make(map[string]*member)}
}

// maxMembers bounds registered (group, client) pairs; a heartbeat that
// would add more is refused (SYSTEM_BUSY: clients retry).
const maxMembers = 100000

var errRegistryFull = errors.New("too many registered clients")

// heartbeat registers hb from c and returns the consumer groups whose
// member set changed.
func (r *registry) heartbeat(c *conn, hb *heartbeatData, user *auth.User, lang string, ver int32, now time.Time) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members+len(hb.ProducerDataSet)+len(hb.ConsumerDataSet) > maxMembers {
		return nil, errRegistryFull
	}
	for _, p := range hb.ProducerDataSet {
		if p.GroupName == "" {
			continue
		}
		g := groupOf(r.producers, p.GroupName)
		old := g[hb.ClientID]
		if old == nil {
			r.members++
		}
		g[hb.ClientID] = &member{clientID: hb.ClientID, conn: c, seen: now, since: sinceOf(old, c, now), user: user, language: lang, version: ver}
	}
	var changed []string
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		g := groupOf(r.consumers, cd.GroupName)
		old := g[hb.ClientID]
		m := &member{clientID: hb.ClientID, conn: c, seen: now, since: sinceOf(old, c, now), user: user, language: lang, version: ver, model: cd.MessageModel, from: cd.ConsumeFromWhere, consumeType: cd.ConsumeType,
			subs: make(map[string]subscriptionData, len(cd.SubscriptionDataSet))}
		if hb.WithoutSub && old != nil {
			m.subs = old.subs
		} else {
			for _, sd := range cd.SubscriptionDataSet {
				m.subs[sd.Topic] = sd
			}
		}
		g[hb.ClientID] = m
		if old == nil {
			r.members++
		}
		if old == nil || old.conn != c {
			changed = append(changed, cd.GroupName)
		}
	}
	return changed, nil
}

// sinceOf is when a member that heartbeats again on c came: old's time
// when it is the same connection, now otherwise.
func sinceOf(old *member, c *conn, now time.Time) time.Time {
	if old != nil && old.conn == c && !old.since.IsZero() {
		return old.since
	}
	return now
}

// ClientInfo is a connected classic client as operators see it: one per
// client id and connection, over the producer and consumer groups it
// heartbeats for.
type ClientInfo struct {
	ClientID string
	// Addr is the client's address (the one a relay's greeting named).
	Addr string
	// Language and Version are what its frames carry (Version is the
	// RocketMQ version code).
	Language string
	Version  int32
	// ProducerGroups and ConsumerGroups it heartbeats for; Topics its
	// consumers subscribe to; ConsumeType "CONSUME_PASSIVELY" (push) or
	// "CONSUME_ACTIVELY" (pull), empty for a producer.
	ProducerGroups, ConsumerGroups, Topics []string
	ConsumeType                            string
	// Since is its first heartbeat on the connection; LastSeen its latest.
	Since, LastSeen time.Time
}

// Clients lists the classic clients registered by heartbeat, by client id.
func (s *Server) Clients() []ClientInfo { return s.reg.clients() }

func (r *registry) clients() []ClientInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	type key struct {
		id string
		c  *conn
	}
	byKey := map[key]*ClientInfo{}
	var order []key
	add := func(m *member) *ClientInfo {
		k := key{m.clientID, m.conn}
		ci := byKey[k]
		if ci == nil {
			ci = &ClientInfo{ClientID: m.clientID, Addr: m.conn.clientAddr(), Language: m.language, Version: m.version, Since: m.since, LastSeen: m.seen}
			byKey[k] = ci
			order = append(order, k)
		}
		if m.since.Before(ci.Since) {
			ci.Since = m.since
		}
		if m.seen.After(ci.LastSeen) {
			ci.LastSeen = m.seen
		}
		return ci
	}
	for g, ms := range r.producers {
		for id, m := range ms {
			if strings.HasPrefix(id, "conn@") {
				continue // a connection that sent a half message before heartbeating
			}
			ci := add(m)
			ci.ProducerGroups = append(ci.ProducerGroups, g)
		}
	}
	for g, ms := range r.consumers {
		for _, m := range ms {
			ci := add(m)
			ci.ConsumerGroups = append(ci.ConsumerGroups, g)
			ci.ConsumeType = m.consumeType
			for t := range m.subs {
				if !slices.Contains(ci.Topics, t) {
					ci.Topics = append(ci.Topics, t)
				}
			}
		}
	}
	out := make([]ClientInfo, 0, len(order))
	for _, k := range order {
		ci := byKey[k]
		sort.Strings(ci.ProducerGroups)
		sort.Strings(ci.ConsumerGroups)
		sort.Strings(ci.Topics)
		out = append(out, *ci)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ClientID != out[j].ClientID {
			return out[i].ClientID < out[j].ClientID
		}
		return out[i].Addr < out[j].Addr
	})
	return out
}

// groupOf returns the members of group in groups, adding an empty set.
func groupOf(groups map[string]map[string]*member, group string) map[string]*member {
	g := groups[group]
	if g == nil {
		g = make(map[string]*member)
		groups[group] = g
	}
	return g
}

// sentHalf registers c as a producer of group when it sends a half
// message: the Go producer heartbeats only to brokers in its cached
// routes, every 30 s, so its first heartbeat may come long after its
// first transaction needs a check.
func (r *registry) sentHalf(c *conn, group string, user *auth.User, now time.Time) {
	if group == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := groupOf(r.producers, group)
	// Keyed by the socket's peer, unique among open connections, where
	// the client address a relay's greeting names may not be: two members'
	// relays can see the same one.
	key := "conn@" + c.remote.String()
	if g[key] == nil {
		if r.members >= maxMembers {
			return
		}
		r.members++
	}
	g[key] = &member{clientID: key, conn: c, seen: now, user: user}
}

// sentRequest records that clientID sent a request (a message to be
// replied to) on c.
func (r *registry) sentRequest(c *conn, clientID string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.requesters[clientID] == nil {
		if r.members >= maxMembers {
			return
		}
		r.members++
	}
	r.requesters[clientID] = &member{clientID: clientID, conn: c, seen: now}
}

// unregister removes clientID from the named groups.
func (r *registry) unregister(clientID, producerGroup, consumerGroup string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.producers[producerGroup]; g != nil {
		if _, ok := g[clientID]; ok {
			delete(g, clientID)
			r.members--
		}
		if len(g) == 0 {
			delete(r.producers, producerGroup)
		}
	}
	if g := r.consumers[consumerGroup]; g != nil {
		if _, ok := g[clientID]; ok {
			delete(g, clientID)
			r.members--
			if len(g) == 0 {
				delete(r.consumers, consumerGroup)
			}
			return []string{consumerGroup}
		}
	}
	return nil
}

// drop removes members matching gone and returns the consumer groups that
// changed.
func (r *registry) drop(gone func(*member) bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, g := range r.producers {
		for id, m := range g {
			if gone(m) {
				delete(g, id)
				r.members--
			}
		}
		if len(g) == 0 {
			delete(r.producers, name)
		}
	}
	for id, m := range r.requesters {
		if gone(m) {
			delete(r.requesters, id)
			r.members--
		}
	}
	var changed []string
	for name, g := range r.consumers {
		n := len(g)
		for id, m := range g {
			if gone(m) {
				delete(g, id)
				r.members--
			}
		}
		if len(g) != n {
			changed = append(changed, name)
		}
		if len(g) == 0 {
			delete(r.consumers, name)
		}
	}
	return changed
}

func (r *registry) connClosed(c *conn) {
	r.notify(r.drop(func(m *member) bool { return m.conn == c }))
}

func (r *registry) expire(before time.Time) {
	changed := r.drop(func(m *member) bool { return m.seen.Before(before) })
	if len(changed) > 0 {
		r.s.log.Info("remoting: clients expired without heartbeat", "groups", changed)
	}
	r.notify(changed)
}

// subscribers lists the consumer groups with a connected member that
// subscribes to topic.
func (r *registry) subscribers(topic string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for g, ms := range r.consumers {
		for _, m := range ms {
			if _, ok := m.subs[topic]; ok {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// subscribedTopics lists the topics a consumer group's connected members
// subscribe to.
func (r *registry) subscribedTopics(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.consumers[group] {
		for t := range m.subs {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// consumerIDs lists a group's client ids, sorted.
func (r *registry) consumerIDs(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.consumers[group]))
	for id := range r.consumers[group] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// subscription returns the expression a group's consumers registered for
// topic.
func (r *registry) subscription(group, topic string) (subscriptionData, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.consumers[group] {
		if sd, ok := m.subs[topic]; ok {
			return sd, true
		}
	}
	return subscriptionData{}, false
}

// producerConns lists the connections of a producer group's live clients
// (most recently seen first) whose registration's user passes may.
func (r *registry) producerConns(group string, may func(*auth.User) bool) []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := make([]*member, 0, len(r.producers[group]))
	for _, m := range r.producers[group] {
		if may(m.user) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *member) int { return b.seen.Compare(a.seen) })
	out := make([]*conn, 0, len(ms))
	for _, m := range ms {
		if !slices.Contains(out, m.conn) {
			out = append(out, m.conn)
		}
	}
	return out
}

// clientConn returns the connection a client (by client id, in any
// producer or consumer group) last sent a heartbeat on, else the one it
// last sent a request to be replied to on, or nil. Heartbeats come first:
// a request names its REPLY_TO_CLIENT itself, so it could name another's.
func (r *registry) clientConn(clientID string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *member
	for _, groups := range []map[string]map[string]*member{r.producers, r.consumers} {
		for _, g := range groups {
			if m := g[clientID]; m != nil && (best == nil || m.seen.After(best.seen)) {
				best = m
			}
		}
	}
	if best == nil {
		best = r.requesters[clientID]
	}
	if best == nil {
		return nil
	}
	return best.conn
}

// groupMembers returns copies of a group's consumer (or producer)
// members, by client id.
func (r *registry) groupMembers(group string, consumers bool) []member {
	r.mu.Lock()
	defer r.mu.Unlock()
	groups := r.producers
	if consumers {
		groups = r.consumers
	}
	out := make([]member, 0, len(groups[group]))
	for _, m := range groups[group] {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.clientID, b.clientID) })
	return out
}

// consumerConns returns the connections of group's consumers, each once:
// those that subscribe to topic, or all of them when topic is "".
func (r *registry) consumerConns(group, topic string) []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*conn
	for _, m := range r.consumers[group] {
		if _, ok := m.subs[topic]; (ok || topic == "") && !slices.Contains(out, m.conn) {
			out = append(out, m.conn)
		}
	}
	return out
}

// notify sends NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every connection
// of each group, so its consumers rebalance now instead of within 20 s.
// It runs with no lock held.
func (r *registry) notify(groups []string) {
	for _, g := range groups {
		for _, c := range r.consumerConns(g, "") {
			_ = r.s.request(c, reqNotifyConsumerIDsChanged, map[string]string{"consumerGroup": g}, nil)
		}
	}
}

// ---- handlers ----------------------------------------------------------------

func (s *Server) heartbeat(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	hb, err := decodeHeartbeat(req.Body)
	if err != nil {
		return invalid("%v", err)
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	// Groups and retry topics are created on first sight: stock clients
	// cannot create them and would retry forever (trap 16).
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		if _, err := s.cl.EnsureRetry(ctx, cd.GroupName); err != nil {
			return s.fail(ctx, err)
		}
	}
	changed, err := s.reg.heartbeat(c, hb, auth.FromContext(ctx), req.Language, req.Version, s.cfg.Clock.Now())
	if err != nil {
		return &codec.Command{Code: codeSystemBusy, Remark: err.Error()}
	}
	s.reg.notify(changed)
	return ok()
}

func (s *Server) unregisterClient(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	id := req.Get("clientID")
	if id == "" {
		return invalid("clientID is required")
	}
	s.reg.notify(s.reg.unregister(id, req.Get("producerGroup"), req.Get("consumerGroup")))
	return ok()
}

func (s *Server) consumerList(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	g := req.Get("consumerGroup")
	if g == "" {
		return invalid("consumerGroup is required")
	}
	ids := s.reg.consumerIDs(g)
	if len(ids) == 0 {
		return &codec.Command{Code: codeSystemError, Remark: "no consumer for this group, " + g}
	}
	body, _ := json.Marshal(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	return &codec.Command{Code: codeSuccess, Body: body}
}

func (s *Server) checkClientConfig(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	var cc struct {
		SubscriptionData *subscriptionData `json:"subscriptionData"`
	}
	if err := json.Unmarshal(req.Body, &cc); err != nil {
		return invalid("CHECK_CLIENT_CONFIG body is not JSON: %v", err)
	}
	if sd := cc.SubscriptionData; sd != nil {
		if _, err := parseFilter(sd.SubString, sd.ExpressionType); err != nil {
			return &codec.Command{Code: codeSubscriptionParseFailed, Remark: err.Error()}
		}
	}
	return ok()
}

// requestContext bounds a non-polling request: ctx is the request's
// context (dispatch: the server's lifetime and the authenticated user),
// which is not cancelled when the connection closes, so a client that
// sends UPDATE_CONSUMER_OFFSET or END_TRANSACTION and hangs up at once
// still gets them applied. (Long polls use the connection's context and
// end with it.)
func (s *Server) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}
