package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
)

// ClientType is the role a client declares in its Settings.
type ClientType int8

const (
	ClientUnspecified ClientType = iota
	ClientProducer
	ClientPushConsumer
	ClientSimpleConsumer
	ClientPullConsumer
	ClientLitePushConsumer
	ClientLiteSimpleConsumer
)

var clientTypeNames = [...]string{"UNSPECIFIED", "PRODUCER", "PUSH_CONSUMER", "SIMPLE_CONSUMER", "PULL_CONSUMER",
	"LITE_PUSH_CONSUMER", "LITE_SIMPLE_CONSUMER"}

func (t ClientType) String() string {
	if t >= 0 && int(t) < len(clientTypeNames) {
		return clientTypeNames[t]
	}
	return fmt.Sprintf("ClientType(%d)", int8(t))
}

// IsConsumer reports whether t consumes (and therefore has a group).
func (t ClientType) IsConsumer() bool {
	return t >= ClientPushConsumer && t <= ClientLiteSimpleConsumer
}

// FilterType is the language of a subscription's filter expression.
type FilterType int8

const (
	FilterTag FilterType = iota
	FilterSQL
)

func (f FilterType) String() string {
	if f == FilterSQL {
		return "SQL"
	}
	return "TAG"
}

// FilterExpression is one subscription's filter.
type FilterExpression struct {
	Type       FilterType
	Expression string
}

// UserAgent describes the client library.
type UserAgent struct {
	Language, Version, Platform, Hostname string
}

// Settings is the latest settings a client declared, as a protocol-neutral
// view. Topic and group names are resource keys ("ns%name" when the client
// uses a namespace). A Settings value is immutable once stored: updates
// replace it.
type Settings struct {
	ClientType ClientType
	// Group is the consumer group (consumers only).
	Group string
	// Subscriptions maps a topic to its filter (consumers only).
	Subscriptions map[string]FilterExpression
	// PublishingTopics are the topics a producer declared.
	PublishingTopics []string
	// RequestTimeout is the client's deadline for ordinary calls.
	RequestTimeout time.Duration
	// LongPollingTimeout is how long the client lets a receive wait (zero:
	// not declared).
	LongPollingTimeout time.Duration
	// Names maps the resource keys above to the names the client used
	// (namespace and bare name); keys without a namespace may
	// be absent.
	Names     map[string]Name
	UserAgent UserAgent
	// Addr is the network address of the connection the settings came
	// on ("" when unknown).
	Addr string
}

// Name is a resource as a client names it.
type Name struct {
	Namespace, Name string
}

// NameOf returns how the client names the resource key: as it declared it,
// else the key itself without a namespace.
func (s *Settings) NameOf(key string) Name {
	if s != nil {
		if n, ok := s.Names[key]; ok {
			return n
		}
	}
	return Name{Name: key}
}

// Publishes reports whether the settings declare topic for publishing.
func (s *Settings) Publishes(topic string) bool {
	return s != nil && slices.Contains(s.PublishingTopics, topic)
}

// Command is a server→client command. It is opaque to the registry: the
// edge that attached the stream knows how to write it (the gRPC edge sends
// *apache.rocketmq.v2.TelemetryCommand values).
type Command any

// Stream is a client's open control channel. Send writes one command; the
// registry never calls it concurrently for one stream (a Link serialises).
type Stream interface {
	Send(cmd Command) error
}

// Errors of Send.
var (
	ErrUnknownClient = errors.New("session: unknown client")
	ErrNoStream      = errors.New("session: client has no open control stream")
)

// DefaultLivenessTimeout is how long a silent client stays registered
// (upstream channelExpiredTimeout; clients heartbeat every 10 s).
const DefaultLivenessTimeout = 120 * time.Second

// Config configures a Registry.
type Config struct {
	// Clock supplies time (default clock.Real).
	Clock clock.Clock
	// LivenessTimeout expires clients not seen for this long (default 120 s).
	LivenessTimeout time.Duration
	// ScanInterval is how often expiry is checked (default 5 s).
	ScanInterval time.Duration
	// OnGone is called (with no lock held) when a client expires or
	// terminates; the node passes the broker's ReleaseClient.
	OnGone func(clientID string)
	Logger *slog.Logger
}

// Registry is the set of live clients. Its methods are safe for
// concurrent use.
type Registry struct {
	clock    clock.Clock
	liveness time.Duration
	interval time.Duration
	onGone   func(string)
	log      *slog.Logger

	clients sync.Map // client id → *client

	mu    sync.Mutex // guards group
	group *lifecycle.Group
}

type client struct {
	id       string
	since    int64        // unix nanoseconds: registered
	seen     atomic.Int64 // unix nanoseconds
	settings atomic.Pointer[Settings]

	mu   sync.Mutex
	link *Link
}

// New returns an empty registry. Start runs its expiry scanner.
func New(cfg Config) *Registry {
	r := &Registry{clock: cfg.Clock, liveness: cfg.LivenessTimeout, interval: cfg.ScanInterval, onGone: cfg.OnGone, log: cfg.Logger}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if r.liveness <= 0 {
		r.liveness = DefaultLivenessTimeout
	}
	if r.interval <= 0 {
		r.interval = 5 * time.Second
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

func (r *Registry) now() int64 { return r.clock.Now().UnixNano() }

// get returns the client, creating it when absent.
func (r *Registry) get(id string) *client {
	if v, ok := r.clients.Load(id); ok {
		return v.(*client)
	}
	c := &client{id: id, since: r.now()}
	c.seen.Store(c.since)
	v, _ := r.clients.LoadOrStore(id, c)
	return v.(*client)
}

// Touch records that the client was seen now (any call). An unknown id is
// registered.
func (r *Registry) Touch(id string) {
	if id == "" {
		return
	}
	r.get(id).seen.Store(r.now())
}

// UpdateSettings replaces the client's settings (every Settings a client
// sends is a full replacement) and marks it seen.
func (r *Registry) UpdateSettings(id string, s *Settings) {
	c := r.get(id)
	c.settings.Store(s)
	c.seen.Store(r.now())
}

// Settings returns the client's latest settings.
func (r *Registry) Settings(id string) (*Settings, bool) {
	v, ok := r.clients.Load(id)
	if !ok {
		return nil, false
	}
	s := v.(*client).settings.Load()
	return s, s != nil
}

// LastSeen returns when the client was last seen.
func (r *Registry) LastSeen(id string) (time.Time, bool) {
	v, ok := r.clients.Load(id)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, v.(*client).seen.Load()), true
}

// Len is the number of registered clients.
func (r *Registry) Len() int {
	n := 0
	r.clients.Range(func(any, any) bool { n++; return true })
	return n
}

// Link is the registry's handle on one attached stream. Its Send is
// serialised, so the edge uses it for its own replies as well as the
// registry for server-initiated commands.
type Link struct {
	reg    *Registry
	id     string
	mu     sync.Mutex
	s      Stream
	closed bool
}

// Send writes cmd on the stream. After a failed write the link is closed
// and detached: the stream is presumed gone.
func (l *Link) Send(cmd Command) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrNoStream
	}
	err := l.s.Send(cmd)
	if err != nil {
		l.closed = true
	}
	l.mu.Unlock()
	if err != nil {
		l.reg.detach(l)
	}
	return err
}

// Close detaches the link (the stream ended). It is idempotent.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.reg.detach(l)
}

// Attach makes s the client's current control stream (the most recent
// one wins) and marks the client seen.
func (r *Registry) Attach(id string, s Stream) *Link {
	c := r.get(id)
	l := &Link{reg: r, id: id, s: s}
	c.mu.Lock()
	c.link = l
	c.mu.Unlock()
	c.seen.Store(r.now())
	return l
}

func (r *Registry) detach(l *Link) {
	v, ok := r.clients.Load(l.id)
	if !ok {
		return
	}
	c := v.(*client)
	c.mu.Lock()
	if c.link == l {
		c.link = nil
	}
	c.mu.Unlock()
}

// Send writes cmd to the client's current control stream.
func (r *Registry) Send(id string, cmd Command) error {
	v, ok := r.clients.Load(id)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownClient, id)
	}
	c := v.(*client)
	c.mu.Lock()
	l := c.link
	c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w (client %q)", ErrNoStream, id)
	}
	return l.Send(cmd)
}

// ClientRef names a live client and its settings at the time of the call.
type ClientRef struct {
	ID       string
	Settings *Settings
	LastSeen time.Time
}

// ProducersOf lists producers that declared topic and have an open
// control stream (the targets of transaction check-backs), most recently
// seen first.
func (r *Registry) ProducersOf(topic string) []ClientRef {
	return r.collect(func(s *Settings) bool {
		return s.ClientType == ClientProducer && s.Publishes(topic)
	}, true)
}

// ErrNoProducer is returned by SendToProducer when no producer of the
// topic could be reached.
var ErrNoProducer = errors.New("session: no live producer of the topic has an open control stream")

// SendToProducer writes one command to one live producer of topic: the
// most recently seen one whose settings declare topic and whose control
// stream is open; when a write fails (the stream is gone) the next one is
// tried. build makes the command for the chosen client (commands may
// depend on its settings, e.g. its namespace). It returns the id of the
// client reached, or ErrNoProducer.
func (r *Registry) SendToProducer(topic string, build func(ClientRef) Command) (string, error) {
	var errs []error
	for _, ref := range r.ProducersOf(topic) {
		err := r.Send(ref.ID, build(ref))
		if err == nil {
			return ref.ID, nil
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("%w: %w", ErrNoProducer, errors.Join(errs...))
	}
	return "", ErrNoProducer
}

// ConsumersOf lists the clients whose settings name group.
func (r *Registry) ConsumersOf(group string) []ClientRef {
	return r.collect(func(s *Settings) bool { return s.ClientType.IsConsumer() && s.Group == group }, false)
}

func (r *Registry) collect(match func(*Settings) bool, needStream bool) []ClientRef {
	var out []ClientRef
	r.clients.Range(func(_, v any) bool {
		c := v.(*client)
		s := c.settings.Load()
		if s == nil || !match(s) {
			return true
		}
		if needStream {
			c.mu.Lock()
			has := c.link != nil
			c.mu.Unlock()
			if !has {
				return true
			}
		}
		out = append(out, ClientRef{ID: c.id, Settings: s, LastSeen: time.Unix(0, c.seen.Load())})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastSeen.Equal(out[j].LastSeen) {
			return out[i].LastSeen.After(out[j].LastSeen)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// ClientView is a registered client as operators see it.
type ClientView struct {
	ID string
	// Settings are its latest settings; nil until it declared any.
	Settings *Settings
	// Since is when it was registered (its first call); LastSeen its
	// latest call.
	Since, LastSeen time.Time
	// Stream: it has an open control stream.
	Stream bool
}

// Clients lists every registered client, by id.
func (r *Registry) Clients() []ClientView {
	var out []ClientView
	r.clients.Range(func(_, v any) bool {
		c := v.(*client)
		c.mu.Lock()
		stream := c.link != nil
		c.mu.Unlock()
		out = append(out, ClientView{ID: c.id, Settings: c.settings.Load(), Since: time.Unix(0, c.since),
			LastSeen: time.Unix(0, c.seen.Load()), Stream: stream})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Terminate forgets the client (NotifyClientTermination) and calls OnGone.
// Unknown ids are ignored, but OnGone still runs: the broker may hold
// auto-renewed deliveries for a client that never sent Settings.
func (r *Registry) Terminate(id string) {
	if id == "" {
		return
	}
	r.remove(id, nil)
	r.gone(id, "terminated")
}

func (r *Registry) remove(id string, only *client) bool {
	v, ok := r.clients.Load(id)
	if !ok {
		return false
	}
	c := v.(*client)
	if only != nil && c != only {
		return false
	}
	if !r.clients.CompareAndDelete(id, c) {
		return false
	}
	c.mu.Lock()
	l := c.link
	c.link = nil
	c.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	}
	return true
}

func (r *Registry) gone(id, reason string) {
	r.log.Debug("client gone", "client_id", id, "reason", reason)
	if r.onGone != nil {
		r.onGone(id)
	}
}

// ExpireIdle removes every client not seen for the liveness timeout and
// returns their ids. The scanner calls it; tests may too.
func (r *Registry) ExpireIdle() []string {
	cutoff := r.clock.Now().Add(-r.liveness).UnixNano()
	var expired []string
	r.clients.Range(func(k, v any) bool {
		c := v.(*client)
		if c.seen.Load() <= cutoff && r.remove(c.id, c) {
			expired = append(expired, c.id)
		}
		return true
	})
	sort.Strings(expired)
	for _, id := range expired {
		r.gone(id, "liveness timeout")
	}
	return expired
}

// Name is the lifecycle component name.
func (r *Registry) Name() string { return "session" }

// Start runs the expiry scanner.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group != nil {
		return errors.New("session: already started")
	}
	r.group = lifecycle.NewGroup(ctx)
	return r.group.Go("session-expiry", r.run)
}

// Stop ends the scanner, waiting at most until ctx ends.
func (r *Registry) Stop(ctx context.Context) error {
	r.mu.Lock()
	g := r.group
	r.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Shutdown(ctx)
}

func (r *Registry) run(ctx context.Context) {
	t := r.clock.NewTimer(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			r.ExpireIdle()
			t.Reset(r.interval)
		}
	}
}
