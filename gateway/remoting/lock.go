package remoting

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Orderly consumers lock their queues (LOCK_BATCH_MQ): a queue of a group
// belongs to one client until it unlocks, its connection closes, or 60 s
// pass without a renewal (clients renew every 20 s).
const lockTTL = 60 * time.Second

type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup  string         `json:"consumerGroup"`
	ClientID       string         `json:"clientId"`
	OnlyThisBroker bool           `json:"onlyThisBroker"`
	MQSet          []messageQueue `json:"mqSet"`
}

type lockKey struct {
	group, topic string
	queue        int32
}

type lockHolder struct {
	clientID string
	conn     *conn
	until    time.Time
}

type lockTable struct {
	mu sync.Mutex
	m  map[lockKey]lockHolder
}

func newLockTable() *lockTable { return &lockTable{m: make(map[lockKey]lockHolder)} }

// maxLocksPerRequest bounds one request's queue set; maxLocks all locks.
const (
	maxLocksPerRequest = 4096
	maxLocks           = 100000
)

func (l *lockTable) lock(c *conn, b *lockBody, now time.Time) []messageQueue {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]messageQueue, 0, len(b.MQSet))
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		h, held := l.m[k]
		if held && h.clientID != b.ClientID && now.Before(h.until) {
			continue
		}
		if !held && len(l.m) >= maxLocks {
			continue // full: the client retries at its next rebalance
		}
		l.m[k] = lockHolder{clientID: b.ClientID, conn: c, until: now.Add(lockTTL)}
		out = append(out, mq)
	}
	return out
}

func (l *lockTable) unlock(b *lockBody) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		if h, held := l.m[k]; held && h.clientID == b.ClientID {
			delete(l.m, k)
		}
	}
}

func (l *lockTable) connClosed(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, h := range l.m {
		if h.conn == c {
			delete(l.m, k)
		}
	}
}

func (l *lockTable) expire(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, h := range l.m {
		if !now.Before(h.until) {
			delete(l.m, k)
		}
	}
}

func decodeLockBody(req *codec.Command) (*lockBody, *codec.Command) {
	var b lockBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return nil, invalid("lock body is not JSON: %v", err)
	}
	if b.ConsumerGroup == "" || b.ClientID == "" {
		return nil, invalid("lock body needs consumerGroup and clientId")
	}
	if len(b.MQSet) > maxLocksPerRequest {
		return nil, invalid("lock body names %d queues, at most %d", len(b.MQSet), maxLocksPerRequest)
	}
	return &b, nil
}

func (s *Server) lockBatch(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	b, bad := decodeLockBody(req)
	if bad != nil {
		return bad
	}
	locked := s.locks.lock(c, b, s.cfg.Clock.Now())
	body, _ := json.Marshal(struct {
		LockOKMQSet []messageQueue `json:"lockOKMQSet"`
	}{locked})
	return &codec.Command{Code: codeSuccess, Body: body}
}

func (s *Server) unlockBatch(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	b, bad := decodeLockBody(req)
	if bad != nil {
		return bad
	}
	s.locks.unlock(b)
	return ok()
}
