package remoting

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

// The POP family (Java 5 remoting clients; JSON headers only) runs on the
// broker's POP engine — the same in-flight state, redelivery and
// dead-lettering as gRPC receives. Classic clients identify a delivery by
// its POP_CK string, "startOffset popTime invisibleTime reviveQid retry
// brokerName queueId queueOffset", and rebuild it from CHANGE_INVISIBLETIME's
// answer, so mqgate's own receipt handles cannot travel in it: popHandles
// remembers, per (group, topic, queue, offset), the current handle and the
// popTime that names it. Entries leave on ack or when their invisibility
// ends; after a restart the map is empty and acks of older deliveries are
// refused (the messages become visible again: at least once).

type popKey struct {
	group, topic string
	queue        int32
	offset       int64
}

type popEntry struct {
	handle  string
	popTime int64
	until   time.Time
}

// maxPopHandles bounds remembered deliveries.
const maxPopHandles = 200000

type popHandles struct {
	mu sync.Mutex
	m  map[popKey]popEntry
}

func newPopHandles() *popHandles { return &popHandles{m: make(map[popKey]popEntry)} }

func (p *popHandles) put(k popKey, e popEntry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[k]; !ok && len(p.m) >= maxPopHandles {
		return false
	}
	p.m[k] = e
	return true
}

func (p *popHandles) get(k popKey, popTime int64) (popEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[k]
	if !ok || e.popTime != popTime {
		return popEntry{}, false
	}
	return e, true
}

func (p *popHandles) del(k popKey) {
	p.mu.Lock()
	delete(p.m, k)
	p.mu.Unlock()
}

func (p *popHandles) expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.m {
		if now.After(e.until) {
			delete(p.m, k)
		}
	}
}

// popCK is the 8-field POP_CK of a delivery (retry mark 0: redeliveries
// stay in their queue).
func popCK(start, popTime, invisible int64, reviveQid int32, broker string, queue int32, offset int64) string {
	return strings.Join([]string{itoa(start), itoa(popTime), itoa(invisible), itoa(int64(reviveQid)), "0", broker,
		itoa(int64(queue)), itoa(offset)}, " ")
}

// parseCK returns popTime of a POP_CK (field 1).
func parseCK(s string) (int64, bool) {
	f := strings.Fields(s)
	if len(f) < 8 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	return n, err == nil
}

const maxPopBatch = 32

func (s *Server) popMessage(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group, topicName := f.str("consumerGroup", true), f.str("topic", true)
	queue := f.int32("queueId", true, -1)
	maxNums := f.int32("maxMsgNums", true, 1)
	invisible := f.int64("invisibleTime", true, 0)
	poll := f.int64("pollTime", false, 0)
	expType, exp := f.str("expType", false), f.str("exp", false)
	attempt := f.str("attemptId", false)
	if r := f.failed(); r != nil {
		return r
	}
	now := s.cfg.Clock.Now()
	empty := func(code int32, remark string) *codec.Command {
		return &codec.Command{Code: code, Remark: remark, Ext: map[string]string{"popTime": itoa(now.UnixMilli()),
			"invisibleTime": itoa(invisible), "reviveQid": "0", "restNum": "0"}}
	}
	if maxNums < 1 || maxNums > maxPopBatch {
		return empty(codeInvalidParameter, "maxMsgNums must be in 1..32")
	}
	filter, err := parseFilter(exp, expType)
	if err != nil {
		return empty(codeSubscriptionParseFailed, err.Error())
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	g, err := s.cl.EnsureGroup(ctx, group)
	if err != nil {
		return s.fail(ctx, err)
	}
	if err := s.cl.CheckNotLite(ctx, topicName); err != nil {
		return s.fail(ctx, err)
	}
	wait := min(time.Duration(max(poll, 0))*time.Millisecond, s.cfg.MaxPullWait)
	// The long poll ends with the connection.
	pctx, pcancel := context.WithTimeout(c.ctx, wait+s.cfg.RequestTimeout)
	defer pcancel()
	ds, err := s.b.Receive(pctx, broker.ReceiveRequest{Group: group, Topic: topicName, Filter: filter, Max: int(maxNums),
		Invisible: time.Duration(invisible) * time.Millisecond, Wait: wait, QueueID: queue, AttemptID: attempt})
	switch k := mqerr.KindOf(err); {
	case err == nil:
	case k == mqerr.KindMessageNotFound:
		return empty(codePollingTimeout, "no new message")
	case k == mqerr.KindTooManyRequests:
		return empty(codePollingFull, mqerr.Message(err))
	default:
		return s.fail(ctx, err)
	}
	popTime := s.cfg.Clock.Now().UnixMilli()
	reviveQid := int32(0)
	if g.FIFO {
		reviveQid = 999
	}
	var body []byte
	starts := map[int32]int64{}
	offsets := map[int32][]string{}
	var order []int32
	for _, d := range ds {
		rec, err := s.cl.RecordAt(topicName, d.QueueID, d.QueueOffset)
		if err != nil {
			s.log.Warn("remoting: a popped message could not be read back; it becomes visible again later", "topic", topicName, "queue", d.QueueID, "offset", d.QueueOffset, "err", err)
			continue
		}
		k := popKey{group, topicName, d.QueueID, d.QueueOffset}
		if !s.pops.put(k, popEntry{handle: d.ReceiptHandle, popTime: popTime, until: s.cfg.Clock.Now().Add(d.InvisibleFor)}) {
			_ = s.b.Release(ctx, group, topicName, []string{d.ReceiptHandle})
			continue
		}
		if _, seen := starts[d.QueueID]; !seen {
			starts[d.QueueID] = d.QueueOffset
			order = append(order, d.QueueID)
		}
		offsets[d.QueueID] = append(offsets[d.QueueID], itoa(d.QueueOffset))
		r := s.wireRecord(c, rec, topicName, d.QueueID)
		r.ReconsumeTimes = max(d.Attempt-1, 0)
		ck := popCK(starts[d.QueueID], popTime, invisible, reviveQid, s.cfg.BrokerName, d.QueueID, d.QueueOffset)
		r.Properties += "POP_CK" + string(wire.NameValueSep) + ck + string(wire.PropertySep)
		if body, err = wire.AppendRecord(body, &r); err != nil {
			s.log.Warn("remoting: a popped message cannot be encoded", "topic", topicName, "err", err)
		}
	}
	var startInfo, msgInfo []string
	for _, q := range order {
		startInfo = append(startInfo, "0 "+itoa(int64(q))+" "+itoa(starts[q]))
		msgInfo = append(msgInfo, "0 "+itoa(int64(q))+" "+strings.Join(offsets[q], ","))
	}
	if len(order) == 0 {
		return empty(codePollingTimeout, "no new message")
	}
	return &codec.Command{Code: codeSuccess, Body: body, Ext: map[string]string{
		"popTime": itoa(popTime), "invisibleTime": itoa(invisible), "reviveQid": itoa(int64(reviveQid)), "restNum": "0",
		"startOffsetInfo": strings.Join(startInfo, ";"), "msgOffsetInfo": strings.Join(msgInfo, ";"),
	}}
}

func (s *Server) ackMessage(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group, topic := f.str("consumerGroup", true), f.str("topic", true)
	queue, offset := f.int32("queueId", true, 0), f.int64("offset", true, 0)
	extra := f.str("extraInfo", true)
	if r := f.failed(); r != nil {
		return r
	}
	popTime, good := parseCK(extra)
	if !good {
		return invalid("extraInfo %.60q is not a POP_CK", extra)
	}
	k := popKey{group, topic, queue, offset}
	e, found := s.pops.get(k, popTime)
	if !found {
		return &codec.Command{Code: codeNoMessage, Remark: "no delivery of this message is in flight (acknowledged, expired or superseded)"}
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	if err := s.b.Ack(ctx, group, topic, []string{e.handle})[0]; err != nil {
		return s.fail(ctx, err)
	}
	s.pops.del(k)
	return ok()
}

// batchAckEntry is one entry of BATCH_ACK_MESSAGE's body (short or long
// member names).
type batchAckEntry struct {
	Group, Topic string
	Start        int64
	Queue        int32
	PopTime      int64
	Bits         []byte
}

// maxBatchAckBits bounds one entry's bit set (bytes).
const maxBatchAckBits = 4096

// decodeBatchAck parses a BATCH_ACK_MESSAGE body.
func decodeBatchAck(b []byte) ([]batchAckEntry, error) {
	var body struct {
		Acks []json.RawMessage `json:"acks"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("batch ack body is not JSON: %w", err)
	}
	out := make([]batchAckEntry, 0, len(body.Acks))
	for _, raw := range body.Acks {
		var short struct {
			C  string `json:"c"`
			T  string `json:"t"`
			SO *int64 `json:"so"`
			Q  *int32 `json:"q"`
			PT *int64 `json:"pt"`
			B  string `json:"b"`
		}
		var long struct {
			ConsumerGroup string `json:"consumerGroup"`
			Topic         string `json:"topic"`
			StartOffset   int64  `json:"startOffset"`
			QueueID       int32  `json:"queueId"`
			PopTime       int64  `json:"popTime"`
			BitSet        string `json:"bitSet"`
		}
		if json.Unmarshal(raw, &short) != nil || json.Unmarshal(raw, &long) != nil {
			return nil, errors.New("batch ack entry is not an object of the expected members")
		}
		if short.C != "" {
			long.ConsumerGroup, long.Topic, long.BitSet = short.C, short.T, short.B
		}
		if short.SO != nil {
			long.StartOffset = *short.SO
		}
		if short.Q != nil {
			long.QueueID = *short.Q
		}
		if short.PT != nil {
			long.PopTime = *short.PT
		}
		bits, err := base64.StdEncoding.DecodeString(long.BitSet)
		if err != nil || len(bits) > maxBatchAckBits {
			return nil, errors.New("batch ack bit set is not base64 (or too long)")
		}
		out = append(out, batchAckEntry{Group: long.ConsumerGroup, Topic: long.Topic, Start: long.StartOffset, Queue: long.QueueID,
			PopTime: long.PopTime, Bits: bits})
	}
	return out, nil
}

func (s *Server) batchAckMessage(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	acks, err := decodeBatchAck(req.Body)
	if err != nil {
		return invalid("%v", err)
	}
	if len(acks) == 0 {
		return &codec.Command{Code: codeNoMessage, Remark: "no ack in the batch"}
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	for _, a := range acks {
		var handles []string
		var keys []popKey
		for i := 0; i < len(a.Bits)*8; i++ {
			if a.Bits[i/8]&(1<<(i%8)) == 0 {
				continue
			}
			k := popKey{a.Group, a.Topic, a.Queue, a.Start + int64(i)}
			if e, found := s.pops.get(k, a.PopTime); found {
				handles, keys = append(handles, e.handle), append(keys, k)
			}
		}
		if len(handles) == 0 {
			continue
		}
		for i, err := range s.b.Ack(ctx, a.Group, a.Topic, handles) {
			if err == nil {
				s.pops.del(keys[i])
			}
		}
	}
	return ok()
}

func (s *Server) changeInvisibleTime(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group, topic := f.str("consumerGroup", true), f.str("topic", true)
	queue, offset := f.int32("queueId", true, 0), f.int64("offset", true, 0)
	extra := f.str("extraInfo", true)
	invisible := f.int64("invisibleTime", true, 0)
	now := s.cfg.Clock.Now()
	answer := func(code int32, remark string, popTime int64) *codec.Command {
		// The header fields travel with every answer: the client reads
		// them before it looks at the code.
		return &codec.Command{Code: code, Remark: remark, Ext: map[string]string{"popTime": itoa(popTime),
			"invisibleTime": itoa(invisible), "reviveQid": "0"}}
	}
	if r := f.failed(); r != nil {
		return answer(r.Code, r.Remark, now.UnixMilli())
	}
	popTime, good := parseCK(extra)
	if !good {
		return answer(codeInvalidParameter, "extraInfo is not a POP_CK", now.UnixMilli())
	}
	k := popKey{group, topic, queue, offset}
	e, found := s.pops.get(k, popTime)
	if !found {
		return answer(codeNoMessage, "no delivery of this message is in flight (acknowledged, expired or superseded)", now.UnixMilli())
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	d := time.Duration(invisible) * time.Millisecond
	h, err := s.b.ChangeInvisible(ctx, group, topic, e.handle, d)
	if err != nil {
		code, remark := errorCode(ctx, s.log, err)
		return answer(int32(code), remark, now.UnixMilli())
	}
	np := now.UnixMilli()
	s.pops.put(k, popEntry{handle: h, popTime: np, until: now.Add(d)})
	return answer(codeSuccess, "", np)
}
