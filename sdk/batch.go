package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Producer batching (ProducerConfig.Linger): messages are gathered into
// batches, each one SendMessage call, as Kafka's producer does with
// linger.ms and batch.size.
//
// A batch holds messages of one topic and one message group (none for
// plain messages), delayed or not: the server stores a batch in one queue,
// the queue of its first message's group, so messages of different groups
// never share one. A batch is sent when it holds BatchMessages messages or
// BatchBytes bytes of bodies, Linger after its first message was added,
// or on Flush and Close.
//
// Order: the batches of a message group are sent one after the other,
// each once the one before it has its outcome (retries included), so the
// server stores a group's messages in the order they were given to
// SendAsync or Send. Batches of plain messages, which have no order
// across queues anyway, are sent as soon as they close.
//
// Outcomes are per message, as if each had been sent alone: a batch the
// server refused as a whole (a validation error answers one status and
// no entries, and stores nothing) is sent again message by message, so a
// bad message fails alone and the others are stored; entries that differ
// give each message its own receipt or error. A batch whose outcome is
// unknown (no answer, or an attempt answered with a replica group's
// HA_NOT_AVAILABLE or SLAVE_PERSISTENCE_TIMEOUT and none OK) is never
// sent again message by message: each of its messages fails with
// ErrOutcomeUnknown.

// Batching defaults.
const (
	// DefaultBatchMessages is the most messages of one batch. Larger
	// batches spread a call's fixed cost over more messages, on the server
	// and here; mqgate takes requests of up to its body limit plus 2 MiB.
	DefaultBatchMessages = 128
	// DefaultBatchBytes is the most bytes of bodies, properties and keys
	// of one batch, well inside mqgate's request limit. A batch a server
	// refuses as too large stores nothing, and is resent message by
	// message.
	DefaultBatchBytes = 1 << 20
	// DefaultMaxBuffered is the most messages a batching producer holds
	// (gathering or in flight) before SendAsync waits for room.
	DefaultMaxBuffered = 4096
)

// laneKey is what the messages of one batch share.
type laneKey struct {
	topic, group string
	delayed      bool
}

// pending is one message given to the batcher.
type pending struct {
	msg   *v2.Message
	id    string
	size  int
	start time.Time // when it was given: its send deadline counts from here
	done  func(SendReceipt, error)
	// taken: it left the gathering batch (Send may no longer withdraw it).
	taken bool
}

// lane gathers the messages of one laneKey.
type lane struct {
	key   laneKey
	open  []*pending // the batch being gathered
	bytes int
	timer *time.Timer
	// gen counts the batches closed; a linger timer closes the batch it
	// was started for only.
	gen uint64
	// Message groups: the closed batches waiting for the one in flight.
	queue [][]*pending
	busy  bool
}

// batcher is a batching producer's state.
type batcher struct {
	p  *Producer
	wg sync.WaitGroup // batch senders

	// mu guards what follows, the fields of every lane and each pending
	// message's taken.
	mu       sync.Mutex
	lanes    map[laneKey]*lane
	buffered int           // messages held (gathering, waiting or in flight)
	room     chan struct{} // closed and replaced when messages are done
	idle     chan struct{} // closed and replaced when buffered drops to 0
	closed   bool
}

func newBatcher(p *Producer) *batcher {
	return &batcher{p: p, lanes: map[laneKey]*lane{}, room: make(chan struct{}), idle: make(chan struct{})}
}

// SendAsync sends m in the background and calls done once with its
// receipt or its error (a *SendError, as Send returns), from a goroutine
// of the producer: done must not block for long. With ProducerConfig.Linger
// set, m is sent in a batch (see Linger); otherwise on its own, at once.
//
// SendAsync waits while the producer holds MaxBuffered messages, until ctx
// ends: m is then not sent and done is called with ctx's error wrapped in
// a *SendError of outcome ErrNotStored. Once given, m's deadline is the
// producer's Timeout from the call (Kafka's delivery timeout); ctx no
// longer matters to it.
func (p *Producer) SendAsync(ctx context.Context, m *Message, done func(SendReceipt, error)) {
	if done == nil {
		done = func(SendReceipt, error) {}
	}
	if p.batch == nil {
		id, v2m, err := p.prepare(m, time.Now())
		if err != nil {
			done(SendReceipt{}, err)
			return
		}
		p.async.Add(1)
		go func() {
			defer p.async.Done()
			sctx, cancel := context.WithTimeout(p.sess.ctx, p.cfg.Timeout)
			defer cancel()
			done(p.sendOne(sctx, m.Topic, id, v2m))
		}()
		return
	}
	if _, err := p.batch.add(ctx, m, done); err != nil {
		done(SendReceipt{}, err)
	}
}

// prepare checks and converts one message for sending.
func (p *Producer) prepare(m *Message, now time.Time) (string, *v2.Message, error) {
	if m == nil || m.Topic == "" {
		topic := ""
		if m != nil {
			topic = m.Topic
		}
		return "", nil, &SendError{Topic: topic, Outcome: ErrNotStored, Err: errors.New("message has no topic")}
	}
	id := m.ID
	if id == "" {
		id = NewMessageID()
	}
	if p.isClosed() {
		return id, nil, &SendError{Topic: m.Topic, MessageIDs: []string{id}, Outcome: ErrNotStored, Err: fmt.Errorf("producer %w", ErrClosed)}
	}
	return id, toV2(m, id, p.topicResource(m.Topic), now), nil
}

// topicResource is topic's resource, shared by the messages sent to the
// topic the producer sent to last (messages only read it).
func (p *Producer) topicResource(topic string) *v2.Resource {
	if r := p.lastTopic.Load(); r != nil && r.Name == topic {
		return r
	}
	r := p.c.resource(topic)
	p.lastTopic.Store(r)
	return r
}

// sendOne sends one converted message under ctx's deadline.
func (p *Producer) sendOne(ctx context.Context, topic, id string, m *v2.Message) (SendReceipt, error) {
	resp, _, err := p.send(ctx, topic, []string{id}, &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	if resp == nil {
		return SendReceipt{}, err
	}
	rs := receipts(resp)
	if len(rs) != 1 {
		return SendReceipt{}, err
	}
	return rs[0], err
}

// sendBatched is Send of a batching producer: it gives m to the batcher
// and waits for its outcome. When ctx ends first and m has not left yet,
// it is withdrawn (ErrNotStored); once it has left, the outcome is
// unknown to this call.
func (p *Producer) sendBatched(ctx context.Context, m *Message) (SendReceipt, error) {
	type result struct {
		r   SendReceipt
		err error
	}
	ch := make(chan result, 1)
	pd, err := p.batch.add(ctx, m, func(r SendReceipt, err error) { ch <- result{r, err} })
	if err != nil {
		return SendReceipt{}, err
	}
	select {
	case res := <-ch:
		return res.r, res.err
	case <-ctx.Done():
	}
	if p.batch.withdraw(pd) {
		return SendReceipt{}, &SendError{Topic: m.Topic, MessageIDs: []string{pd.id}, Outcome: ErrNotStored,
			Err: fmt.Errorf("the send's context ended before its batch was sent: %w", ctx.Err())}
	}
	select {
	case res := <-ch: // it may have finished meanwhile
		return res.r, res.err
	default:
	}
	return SendReceipt{}, &SendError{Topic: m.Topic, MessageIDs: []string{pd.id}, Attempts: 1, Outcome: ErrOutcomeUnknown,
		Err: fmt.Errorf("the send's context ended while its batch was in flight: %w", ctx.Err())}
}

// add puts m in its lane's gathering batch, waiting for room until ctx
// ends, and closes the batch when it is full.
func (b *batcher) add(ctx context.Context, m *Message, done func(SendReceipt, error)) (*pending, error) {
	now := time.Now()
	id, v2m, err := b.p.prepare(m, now)
	if err != nil {
		return nil, err
	}
	pd := &pending{msg: v2m, id: id, size: messageBytes(m), start: now, done: done}
	key := laneKey{topic: m.Topic, group: m.MessageGroup, delayed: !m.DeliveryTime.IsZero()}
	b.mu.Lock()
	for !b.closed && b.buffered >= b.p.cfg.MaxBuffered {
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, &SendError{Topic: m.Topic, MessageIDs: []string{id}, Outcome: ErrNotStored,
				Err: fmt.Errorf("no room in the producer's buffer (%d messages) before the context ended: %w", b.p.cfg.MaxBuffered, ctx.Err())}
		}
		b.mu.Lock()
	}
	if b.closed {
		b.mu.Unlock()
		return nil, &SendError{Topic: m.Topic, MessageIDs: []string{id}, Outcome: ErrNotStored, Err: fmt.Errorf("producer %w", ErrClosed)}
	}
	l := b.lanes[key]
	if l == nil {
		l = &lane{key: key}
		b.lanes[key] = l
	}
	if len(l.open) > 0 && l.bytes+pd.size > b.p.cfg.BatchBytes {
		// It would take the batch past its bytes: the batch goes without
		// it (a message larger than BatchBytes goes alone).
		b.closeLocked(l)
	}
	b.buffered++
	l.open = append(l.open, pd)
	l.bytes += pd.size
	switch {
	case len(l.open) >= b.p.cfg.BatchMessages || l.bytes >= b.p.cfg.BatchBytes:
		b.closeLocked(l)
	case len(l.open) == 1:
		gen := l.gen
		l.timer = time.AfterFunc(b.p.cfg.Linger, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if l.gen == gen && len(l.open) > 0 {
				b.closeLocked(l)
			}
		})
	}
	b.mu.Unlock()
	return pd, nil
}

// messageBytes is what m weighs against BatchBytes: its body, properties,
// keys, tag and message group.
func messageBytes(m *Message) int {
	n := len(m.Body) + len(m.Tag) + len(m.MessageGroup)
	for k, v := range m.Properties {
		n += len(k) + len(v)
	}
	for _, k := range m.Keys {
		n += len(k)
	}
	return n
}

// closeLocked closes l's gathering batch and sends it (a message group's
// once the batch before it is done).
// b.mu must be held.
func (b *batcher) closeLocked(l *lane) {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.gen++
	batch := l.open
	l.open, l.bytes = nil, 0
	if len(batch) == 0 {
		return
	}
	for _, pd := range batch {
		pd.taken = true
	}
	b.wg.Add(1)
	if l.key.group == "" {
		go func() {
			defer b.wg.Done()
			b.sendBatch(l.key, batch)
		}()
		return
	}
	if l.busy {
		l.queue = append(l.queue, batch)
		b.wg.Done() // the running sender takes it
		return
	}
	l.busy = true
	go func() {
		defer b.wg.Done()
		for {
			b.sendBatch(l.key, batch)
			b.mu.Lock()
			if len(l.queue) == 0 {
				l.busy = false
				b.dropIdleLocked(l)
				b.mu.Unlock()
				return
			}
			batch = l.queue[0]
			l.queue = l.queue[1:]
			b.mu.Unlock()
		}
	}()
}

// dropIdleLocked forgets a lane with nothing in it, so lanes of message
// groups no longer used do not pile up.
// b.mu must be held.
func (b *batcher) dropIdleLocked(l *lane) {
	if len(l.open) == 0 && len(l.queue) == 0 && !l.busy && b.lanes[l.key] == l {
		delete(b.lanes, l.key)
	}
}

// withdraw takes pd out of its gathering batch if it has not left yet.
func (b *batcher) withdraw(pd *pending) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pd.taken {
		return false
	}
	for _, l := range b.lanes {
		for i, q := range l.open {
			if q == pd {
				l.open = append(l.open[:i], l.open[i+1:]...)
				l.bytes -= pd.size
				pd.taken = true
				b.releaseLocked(1)
				if len(l.open) == 0 {
					if l.timer != nil {
						l.timer.Stop()
						l.timer = nil
					}
					l.gen++
					b.dropIdleLocked(l)
				}
				return true
			}
		}
	}
	return false
}

// releaseLocked gives back the room of n messages done.
// b.mu must be held.
func (b *batcher) releaseLocked(n int) {
	b.buffered -= n
	close(b.room)
	b.room = make(chan struct{})
	if b.buffered == 0 {
		close(b.idle)
		b.idle = make(chan struct{})
	}
}

// sendBatch sends one batch and reports each message's outcome.
func (b *batcher) sendBatch(key laneKey, batch []*pending) {
	// The batch's deadline is its oldest message's.
	ctx, cancel := context.WithDeadline(b.p.sess.ctx, batch[0].start.Add(b.p.cfg.Timeout))
	defer cancel()
	b.p.sendPending(ctx, key.topic, batch)
	b.mu.Lock()
	b.releaseLocked(len(batch))
	b.mu.Unlock()
}

// sendPending sends batch in one request and calls each message's done.
func (p *Producer) sendPending(ctx context.Context, topic string, batch []*pending) {
	ids := make([]string, len(batch))
	req := &v2.SendMessageRequest{Messages: make([]*v2.Message, len(batch))}
	for i, pd := range batch {
		ids[i], req.Messages[i] = pd.id, pd.msg
	}
	resp, attempts, err := p.send(ctx, topic, ids, req)
	var se *SendError
	if err != nil && resp == nil && len(batch) > 1 && errors.As(err, &se) && se.Outcome == ErrNotStored && se.Attempts > 0 &&
		CodeOf(err) != CodeTooManyRequests && ctx.Err() == nil {
		// Refused as a whole with nothing stored (a validation error
		// answers no entries): each message again on its own, in order,
		// so each gets its own verdict.
		for _, pd := range batch {
			pd.done(p.sendOne(ctx, topic, pd.id, pd.msg))
		}
		return
	}
	if resp == nil {
		for _, pd := range batch {
			pd.done(SendReceipt{}, perMessage(err, topic, pd.id))
		}
		return
	}
	ents := resp.GetEntries()
	for i, pd := range batch {
		if i >= len(ents) {
			pd.done(SendReceipt{}, perMessage(err, topic, pd.id))
			continue
		}
		pd.done(entryOutcome(ents[i], topic, pd.id, attempts))
	}
}

// perMessage is a batch's *SendError restated for one of its messages.
func perMessage(err error, topic, id string) error {
	var se *SendError
	if !errors.As(err, &se) {
		return err
	}
	return &SendError{Topic: topic, MessageIDs: []string{id}, Attempts: se.Attempts, Outcome: se.Outcome, Err: se.Err}
}

// entryOutcome is one message's receipt and error from its entry in a
// response that stored something.
func entryOutcome(e *v2.SendResultEntry, topic, id string, attempts int) (SendReceipt, error) {
	st := e.GetStatus()
	r := SendReceipt{MessageID: e.GetMessageId(), Offset: e.GetOffset(), RecallHandle: e.GetRecallHandle()}
	if st.GetCode() == v2.Code_OK {
		return r, nil
	}
	cause := statusErr("SendMessage", st)
	fail := func(out error) *SendError {
		return &SendError{Topic: topic, MessageIDs: []string{id}, Attempts: attempts, Outcome: out, Err: cause}
	}
	if isNotDurable(cause) {
		return r, fail(ErrNotDurable)
	}
	switch classifyCode(st.GetCode()) {
	case outUnknown, outRetryMaybe:
		// outRetryMaybe: a replica group did not commit it in time; it
		// may still commit.
		return SendReceipt{}, fail(ErrOutcomeUnknown)
	}
	return SendReceipt{}, fail(ErrNotStored)
}

// Flush sends every batch being gathered now and waits until every
// message given before the call has its outcome, or ctx ends. Without
// Linger it waits for the SendAsync calls in flight.
func (p *Producer) Flush(ctx context.Context) error {
	if p.batch == nil {
		done := make(chan struct{})
		go func() { p.async.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sdk: flush: %w", ctx.Err())
		}
	}
	b := p.batch
	b.mu.Lock()
	for _, l := range b.lanes {
		b.closeLocked(l)
	}
	for b.buffered > 0 {
		idle := b.idle
		b.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("sdk: flush: messages still in flight: %w", ctx.Err())
		}
		b.mu.Lock()
	}
	b.mu.Unlock()
	return nil
}

// stopBatching refuses new messages, sends what is gathered and waits for
// every batch sender until ctx ends.
func (p *Producer) stopBatching(ctx context.Context) error {
	var err error
	if p.batch != nil {
		b := p.batch
		b.mu.Lock()
		b.closed = true
		close(b.room) // wake SendAsync calls waiting for room: they fail
		b.room = make(chan struct{})
		for _, l := range b.lanes {
			b.closeLocked(l)
		}
		b.mu.Unlock()
		err = waitGroup(ctx, &b.wg)
	}
	if aerr := waitGroup(ctx, &p.async); aerr != nil && err == nil {
		err = aerr
	}
	return err
}

// waitGroup waits for wg until ctx ends.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("producer: sends still in flight at the deadline: %w", ctx.Err())
	}
}
