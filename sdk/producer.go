package sdk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// DefaultSendTimeout is a send's deadline when its ctx has none.
const DefaultSendTimeout = 5 * time.Second

// ProducerConfig configures NewProducer.
type ProducerConfig struct {
	// Topics the producer will send to, declared in its Telemetry
	// settings (optional: any topic can be sent to).
	Topics []string
	// MaxAttempts is the most attempts one send makes, the first
	// included (0: the server's policy, 3 with mqgate).
	MaxAttempts int
	// Timeout is the deadline of a send whose ctx has none (0:
	// DefaultSendTimeout). All attempts share it. A message given to
	// SendAsync, or batched, has this deadline from when it was given.
	Timeout time.Duration

	// Linger, when above zero, makes the producer batch what Send and
	// SendAsync are given, as Kafka's linger.ms does: messages of one topic
	// and message group are gathered and sent in one SendMessage call once
	// BatchMessages or BatchBytes is reached, or Linger after the batch's
	// first message. Each message still gets its own receipt or error, and
	// the messages of a message group are stored in the order given (see
	// SendAsync). 0: every Send is its own call.
	Linger time.Duration
	// BatchMessages is the most messages of one batch (0:
	// DefaultBatchMessages).
	BatchMessages int
	// BatchBytes is the most bytes of bodies, properties and keys of one
	// batch, as Kafka's batch.size (0: DefaultBatchBytes); a message larger
	// than it goes alone.
	BatchBytes int
	// MaxBuffered is the most messages a batching producer holds,
	// gathering or in flight, before SendAsync and Send wait for room (0:
	// DefaultMaxBuffered).
	MaxBuffered int
}

// Producer sends messages. It is safe for concurrent use.
type Producer struct {
	*member
	cfg ProducerConfig
	// batch gathers messages when cfg.Linger is set.
	batch *batcher
	// async counts unbatched SendAsync sends in flight.
	async sync.WaitGroup
	// lastTopic is the resource of the topic last sent to (prepare).
	lastTopic atomic.Pointer[v2.Resource]
}

// NewProducer starts a producer: it opens its Telemetry stream and waits
// for the server's settings until ctx ends.
func (c *Client) NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultSendTimeout
	}
	if cfg.Linger < 0 || cfg.BatchMessages < 0 || cfg.BatchBytes < 0 || cfg.MaxBuffered < 0 {
		return nil, errors.New("sdk: NewProducer: Linger, BatchMessages, BatchBytes and MaxBuffered must not be negative")
	}
	if cfg.BatchMessages == 0 {
		cfg.BatchMessages = DefaultBatchMessages
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.MaxBuffered == 0 {
		cfg.MaxBuffered = DefaultMaxBuffered
	}
	topics := make([]*v2.Resource, 0, len(cfg.Topics))
	for _, t := range trimSpace(cfg.Topics) {
		topics = append(topics, c.resource(t))
	}
	ct := v2.ClientType_PRODUCER
	settings := &v2.Settings{
		ClientType:     &ct,
		AccessPoint:    accessPoint(c.endpoint),
		RequestTimeout: durationpb.New(cfg.Timeout),
		PubSub:         &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: topics}},
		UserAgent:      userAgent(),
	}
	m, err := c.join(ctx, "producer", settings, &v2.HeartbeatRequest{ClientType: ct}, nil)
	if err != nil {
		return nil, err
	}
	p := &Producer{member: m, cfg: cfg}
	if cfg.Linger > 0 {
		p.batch = newBatcher(p)
	}
	// What was given before Close is sent (or fails) before the session
	// ends, whoever closes the producer.
	m.drain = p.stopBatching
	return p, nil
}

// ClientID is the producer's client id (x-mq-client-id).
func (p *Producer) ClientID() string { return p.sess.clientID }

// Close refuses new sends, sends what a batching producer gathered and
// waits for the sends in flight, then notifies the server, ends the
// Telemetry stream and waits for the producer's goroutines, all until ctx
// ends. Sends after Close fail with ErrClosed.
func (p *Producer) Close(ctx context.Context) error { return p.close(ctx) }

// Send sends one message. See SendBatch for the retry contract.
//
// With Linger set, m is batched with other messages (SendAsync's rules),
// and Send waits for its outcome: when ctx ends before m's batch was
// sent, m is withdrawn (ErrNotStored); after that, the outcome is
// ErrOutcomeUnknown to this call.
func (p *Producer) Send(ctx context.Context, m *Message) (SendReceipt, error) {
	if p.batch != nil {
		return p.sendBatched(ctx, m)
	}
	rs, err := p.SendBatch(ctx, []*Message{m})
	if len(rs) == 1 {
		return rs[0], err
	}
	return SendReceipt{}, err
}

// policy is the retry policy: attempts and TOO_MANY_REQUESTS backoff.
type policy struct {
	attempts         int
	initial, maxWait time.Duration
	multiplier       float64
}

func (p *Producer) policy() policy {
	pol := policy{attempts: 3, initial: 10 * time.Millisecond, maxWait: time.Second, multiplier: 2}
	if bp := p.sess.serverSettings().GetBackoffPolicy(); bp != nil {
		if bp.GetMaxAttempts() > 0 {
			pol.attempts = int(bp.GetMaxAttempts())
		}
		if e := bp.GetExponentialBackoff(); e != nil {
			pol.initial, pol.maxWait = e.GetInitial().AsDuration(), e.GetMax().AsDuration()
			if e.GetMultiplier() >= 1 {
				pol.multiplier = float64(e.GetMultiplier())
			}
		}
	}
	if p.cfg.MaxAttempts > 0 {
		pol.attempts = p.cfg.MaxAttempts
	}
	return pol
}

func (pol policy) backoff(failed int) time.Duration {
	d := float64(pol.initial) * math.Pow(pol.multiplier, float64(failed-1))
	return time.Duration(min(d, float64(pol.maxWait)))
}

// outcome of one attempt.
type outcome int

const (
	outStored     outcome = iota // every entry OK
	outRetry                     // nothing stored, safe to try again
	outRejected                  // nothing stored, trying again would not help
	outUnknown                   // may have been stored
	outMixed                     // entries differ (some stored)
	outRetryMaybe                // may have been stored; trying again (same id) is what the server asks
)

// SendBatch sends messages of one topic in one request (the server stores
// them in one queue, in order) and returns one receipt per message.
//
// The retry contract: one deadline (ctx's, else ProducerConfig.Timeout)
// covers every attempt, and each attempt runs with what remains of it; no
// attempt starts once it has passed. An attempt is repeated, with the same
// message ids, if it certainly stored nothing: the server answered
// TOO_MANY_REQUESTS (after the server's backoff, if it fits before the
// deadline) or gRPC UNAVAILABLE, or the request never left this process;
// or if the server asks for it: HA_NOT_AVAILABLE or
// SLAVE_PERSISTENCE_TIMEOUT (a replica group did not commit the messages
// in time; they may still commit), after the backoff.
// A failure is a *SendError whose outcome is ErrNotStored (no attempt
// may have stored anything), ErrOutcomeUnknown (the request left and no
// answer came, or an attempt was answered HA_NOT_AVAILABLE or
// SLAVE_PERSISTENCE_TIMEOUT and none OK: it may be stored) or
// ErrNotDurable (stored, flush not confirmed; receipts are returned).
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message) ([]SendReceipt, error) {
	if len(msgs) == 0 {
		return nil, errors.New("sdk: SendBatch: no messages")
	}
	topic := msgs[0].Topic
	ids := make([]string, len(msgs))
	now := time.Now()
	req := &v2.SendMessageRequest{Messages: make([]*v2.Message, len(msgs))}
	for i, m := range msgs {
		if m == nil || m.Topic == "" {
			return nil, &SendError{Topic: topic, Outcome: ErrNotStored, Err: fmt.Errorf("message %d has no topic", i)}
		}
		if m.Topic != topic {
			return nil, &SendError{Topic: topic, Outcome: ErrNotStored, Err: fmt.Errorf("one batch must have one topic (%q and %q differ)", topic, m.Topic)}
		}
		ids[i] = m.ID
		if ids[i] == "" {
			ids[i] = NewMessageID()
		}
		req.Messages[i] = toV2(m, ids[i], p.c.resource(topic), now)
	}
	if p.isClosed() {
		return nil, &SendError{Topic: topic, MessageIDs: ids, Outcome: ErrNotStored, Err: fmt.Errorf("producer %w", ErrClosed)}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
		defer cancel()
	}
	resp, _, err := p.send(ctx, topic, ids, req)
	if resp != nil {
		return receipts(resp), err
	}
	return nil, err
}

// send makes the attempts of one SendMessage request under ctx's deadline
// (see SendBatch) and returns the last response (nil when none is to be
// reported: receipts come only from a response that stored something),
// the attempts made and the *SendError of a failure.
func (p *Producer) send(ctx context.Context, topic string, ids []string, req *v2.SendMessageRequest) (*v2.SendMessageResponse, int, error) {
	fail := func(attempts int, out error, cause error) *SendError {
		return &SendError{Topic: topic, MessageIDs: ids, Attempts: attempts, Outcome: out, Err: cause}
	}
	pol := p.policy()
	maybe := false // an attempt may have stored the batch
	notStored := func() error {
		if maybe {
			return ErrOutcomeUnknown
		}
		return ErrNotStored
	}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			// Only reachable before the first attempt: later ones check
			// the time left before sleeping.
			return nil, n - 1, fail(n-1, notStored(), err)
		}
		resp, out, cause := p.attempt(ctx, req)
		switch out {
		case outStored:
			return resp, n, nil
		case outMixed:
			return resp, n, fail(n, mixedOutcome(resp), cause)
		case outUnknown:
			return nil, n, fail(n, ErrOutcomeUnknown, cause)
		case outRejected:
			if isNotDurable(cause) {
				return resp, n, fail(n, ErrNotDurable, cause)
			}
			// This attempt stored nothing; an earlier one may have.
			return nil, n, fail(n, notStored(), cause)
		}
		// outRetry: nothing stored; outRetryMaybe: perhaps stored, and
		// tried again with the same message id.
		maybe = maybe || out == outRetryMaybe
		if n >= pol.attempts {
			return nil, n, fail(n, notStored(), cause)
		}
		wait := time.Duration(0)
		if errors.Is(cause, ErrTooManyRequests) || errors.Is(cause, ErrUnavailable) || out == outRetryMaybe {
			wait = pol.backoff(n)
		}
		if dl, _ := ctx.Deadline(); time.Until(dl) <= wait {
			return nil, n, fail(n, notStored(), fmt.Errorf("%w; no time left for another attempt before the deadline", cause))
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, n, fail(n, notStored(), fmt.Errorf("%w; deadline reached while backing off", cause))
			case <-t.C:
			}
		}
	}
}

// attempt makes one SendMessage call and classifies what happened.
func (p *Producer) attempt(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, outcome, error) {
	actx, a := withAttempt(p.c.outgoing(ctx, p.sess.clientID))
	resp, err := p.c.ms.SendMessage(actx, req)
	if err != nil {
		return nil, classifyRPCError(err, a), grpcErr("SendMessage", err)
	}
	st := resp.GetStatus()
	switch st.GetCode() {
	case v2.Code_OK:
		if len(resp.GetEntries()) != len(req.GetMessages()) {
			return nil, outUnknown, fmt.Errorf("SendMessage: %d result entries for %d messages", len(resp.GetEntries()), len(req.GetMessages()))
		}
		return resp, outStored, nil
	case v2.Code_MULTIPLE_RESULTS:
		return resp, outMixed, statusErr("SendMessage", st)
	}
	return resp, classifyCode(st.GetCode()), statusErr("SendMessage", st)
}

// classifyCode sorts a non-OK payload status.
func classifyCode(c v2.Code) outcome {
	switch {
	case c == v2.Code_TOO_MANY_REQUESTS:
		return outRetry
	case c == v2.Code_MASTER_PERSISTENCE_TIMEOUT:
		return outRejected // stored; SendBatch reports ErrNotDurable
	case c == v2.Code_SLAVE_PERSISTENCE_TIMEOUT || c == v2.Code_HA_NOT_AVAILABLE:
		// A replica group did not commit it (the leader changed, or no
		// majority in time): it may still commit, and the server asks
		// for a retry, which the message id lets consumers deduplicate.
		return outRetryMaybe
	case c == v2.Code_REQUEST_TIMEOUT:
		return outUnknown
	case c >= 40000 && c < 50000:
		return outRejected // validation, missing topic, forbidden...: nothing stored
	}
	return outUnknown // internal errors: the server cannot promise nothing was stored
}

func isNotDurable(err error) bool { return CodeOf(err) == CodeMasterPersistenceTimeout }

// classifyRPCError sorts a gRPC-level failure by what reached the wire.
func classifyRPCError(err error, a *attempt) outcome {
	code := status.Code(err)
	if !a.sent.Load() {
		// The request never left: nothing happened. A connection problem
		// may clear up; anything else (deadline, message too large) will not.
		if code == codes.Unavailable {
			return outRetry
		}
		return outRejected
	}
	if a.answered.Load() {
		switch code {
		case codes.Unavailable:
			return outRetry // the server's own "nothing happened" (drain)
		case codes.InvalidArgument, codes.Unimplemented, codes.Unauthenticated, codes.PermissionDenied,
			codes.ResourceExhausted, codes.FailedPrecondition, codes.OutOfRange, codes.NotFound, codes.AlreadyExists:
			return outRejected // refused before any handler stored anything
		}
	}
	return outUnknown
}

func receipts(resp *v2.SendMessageResponse) []SendReceipt {
	out := make([]SendReceipt, len(resp.GetEntries()))
	for i, e := range resp.GetEntries() {
		if e.GetStatus().GetCode() == v2.Code_OK || isNotDurable(statusErr("", e.GetStatus())) {
			out[i] = SendReceipt{MessageID: e.GetMessageId(), Offset: e.GetOffset(), RecallHandle: e.GetRecallHandle()}
		}
	}
	return out
}

// mixedOutcome is the weakest promise among differing entries.
func mixedOutcome(resp *v2.SendMessageResponse) error {
	out := ErrNotDurable
	for _, e := range resp.GetEntries() {
		switch c := e.GetStatus().GetCode(); {
		case c == v2.Code_OK:
		case classifyCode(c) == outUnknown || classifyCode(c) == outRetryMaybe:
			return ErrOutcomeUnknown
		case !isNotDurable(statusErr("", e.GetStatus())):
			out = ErrNotStored // some entries were refused; receipts show which were stored
		}
	}
	return out
}
