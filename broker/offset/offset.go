package offset

import (
	"context"
	"errors"
	"time"

	"github.com/mqgate/mqgate/broker/longpoll"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
)

// Store is what the service reads.
type Store interface {
	ReadQueue(topic string, queueID int32, fromOffset int64, max int) ([]storage.QueueEntry, error)
	ReadMessage(physOffset int64, size int32) (*message.Message, error)
	QueueRange(topic string, queueID int32) (min, max int64)
	OffsetForTime(topic string, queueID int32, unixMs int64) (int64, error)
}

// Offsets is the committed-offset store.
type Offsets interface {
	// CommitOffset records offset; DurabilityLocal when it is on disk
	// (or in a majority of a replica group's logs) already.
	CommitOffset(k metastore.OffsetKey, offset int64) (metastore.Durability, error)
	Offset(k metastore.OffsetKey) (int64, bool)
	// Flush persists committed offsets now (fsynced when it returns nil).
	Flush() error
}

// Service serves offsets and pulls.
type Service struct {
	store   Store
	offsets Offsets
	hub     *longpoll.Hub
	clk     clock.Clock
}

// New returns the service.
func New(st Store, offs Offsets, hub *longpoll.Hub, clk clock.Clock) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Service{store: st, offsets: offs, hub: hub, clk: clk}
}

func checkQueue(t model.Topic, q int32) error {
	if q < 0 || q >= t.Queues {
		return mqerr.Errorf(mqerr.KindBadRequest, "topic %q has queues 0..%d, not %d", t.Name, t.Queues-1, q)
	}
	return nil
}

// Range returns a queue's min and max (next) offsets.
func (s *Service) Range(t model.Topic, q int32) (min, max int64, err error) {
	if err := checkQueue(t, q); err != nil {
		return 0, 0, err
	}
	min, max = s.store.QueueRange(t.Name, q)
	return min, max, nil
}

// PullResult is one pull's answer.
type PullResult struct {
	Messages []*model.Delivered
	// Next is the offset to pull from next time.
	Next     int64
	Min, Max int64
}

// Pull reads up to max messages of queue q from offset, skipping those the
// filter rejects, and waits up to wait when there is nothing new. An
// offset outside [min, max] ⇒ KindIllegalOffset; nothing new after the
// wait ⇒ KindMessageNotFound (with Next set).
func (s *Service) Pull(ctx context.Context, t model.Topic, q int32, offset int64, max int, f model.Filter, wait time.Duration) (PullResult, error) {
	if err := checkQueue(t, q); err != nil {
		return PullResult{}, err
	}
	if max <= 0 {
		max = 1
	}
	max = min(max, 1024)
	var until time.Time
	if wait > 0 {
		until = s.clk.Now().Add(wait)
	}
	hashes := map[int64]struct{}{}
	for tag := range f.Tags {
		hashes[message.TagHash(tag)] = struct{}{}
	}
	for {
		ch, release, err := s.hub.Watch(longpoll.QueueKey(t.Name, q))
		if err != nil {
			return PullResult{}, err
		}
		res, err := s.read(t, q, offset, max, f, hashes)
		if err != nil || len(res.Messages) > 0 || res.Next != offset {
			release()
			if err == nil && len(res.Messages) == 0 {
				err = mqerr.Errorf(mqerr.KindMessageNotFound, "no message matching the filter between offsets %d and %d", offset, res.Next)
			}
			return res, err
		}
		if !s.clk.Now().Before(until) {
			release()
			return res, mqerr.Errorf(mqerr.KindMessageNotFound, "no new message at offset %d of %s/%d", offset, t.Name, q)
		}
		tm := clock.At(s.clk, until)
		select {
		case <-ch:
		case <-tm.C():
		case <-ctx.Done():
		case <-s.hub.Closed():
		}
		tm.Stop()
		release()
		if ctx.Err() != nil {
			return res, mqerr.Errorf(mqerr.KindMessageNotFound, "no new message at offset %d of %s/%d", offset, t.Name, q)
		}
		select {
		case <-s.hub.Closed():
			return res, mqerr.Errorf(mqerr.KindMessageNotFound, "no new message at offset %d of %s/%d (draining)", offset, t.Name, q)
		default:
		}
	}
}

func (s *Service) read(t model.Topic, q int32, offset int64, max int, f model.Filter, hashes map[int64]struct{}) (PullResult, error) {
	lo, hi := s.store.QueueRange(t.Name, q)
	res := PullResult{Next: offset, Min: lo, Max: hi}
	if offset < lo || offset > hi {
		return res, mqerr.Errorf(mqerr.KindIllegalOffset, "offset %d is outside the retained range [%d, %d] of %s/%d", offset, lo, hi, t.Name, q)
	}
	scan := max
	if !f.All() {
		scan = 256
	}
	for len(res.Messages) < max {
		ents, err := s.store.ReadQueue(t.Name, q, res.Next, scan)
		if errors.Is(err, storage.ErrOffsetMoved) {
			lo, _ := s.store.QueueRange(t.Name, q)
			return res, mqerr.Errorf(mqerr.KindIllegalOffset, "offset %d was removed by retention; the queue now starts at %d", res.Next, lo)
		}
		if err != nil {
			return res, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the queue")
		}
		if len(ents) == 0 {
			return res, nil
		}
		for _, e := range ents {
			if len(res.Messages) >= max {
				break
			}
			res.Next = e.QueueOffset + 1
			if f.ByTag() {
				if _, ok := hashes[e.TagHash]; !ok {
					continue
				}
			}
			m, err := s.store.ReadMessage(e.PhysOffset, e.Size)
			if err != nil {
				return res, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading a message")
			}
			if !f.Match(m.Tag(), m) {
				continue
			}
			m.QueueOffset = e.QueueOffset
			d := record.FromRecord(m)
			d.Message.Topic = t.Name
			d.QueueID, d.QueueOffset, d.Attempt = q, e.QueueOffset, 1
			res.Messages = append(res.Messages, d)
		}
	}
	return res, nil
}

// Update commits a group's offset for a queue. It must lie in [min, max].
// With durable set it returns only once the offset is on disk (a consumer
// managing its own progress is told OK only for what survives a crash);
// otherwise it is persisted by the next periodic metadata flush.
func (s *Service) Update(t model.Topic, group string, q int32, offset int64, durable bool) (metastore.Durability, error) {
	lo, hi, err := s.Range(t, q)
	if err != nil {
		return 0, err
	}
	if offset < lo || offset > hi {
		return 0, mqerr.Errorf(mqerr.KindIllegalOffset, "offset %d is outside [%d, %d] of %s/%d", offset, lo, hi, t.Name, q)
	}
	d, err := s.offsets.CommitOffset(metastore.OffsetKey{Group: group, Topic: t.Name, QueueID: q}, offset)
	if err != nil {
		if mqerr.Classified(err) {
			return d, err
		}
		return d, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "recording the committed offset")
	}
	if durable && d != metastore.DurabilityLocal {
		if err := s.offsets.Flush(); err != nil {
			return d, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "persisting the committed offset")
		}
		d = metastore.DurabilityLocal
	}
	return d, nil
}

// Get returns a group's committed offset (KindOffsetNotFound when none).
func (s *Service) Get(t model.Topic, group string, q int32) (int64, error) {
	if err := checkQueue(t, q); err != nil {
		return 0, err
	}
	off, ok := s.offsets.Offset(metastore.OffsetKey{Group: group, Topic: t.Name, QueueID: q})
	if !ok {
		return 0, mqerr.Errorf(mqerr.KindOffsetNotFound, "group %q has no committed offset for %s/%d", group, t.Name, q)
	}
	return off, nil
}

// Policy selects what Query looks for.
type Policy int8

const (
	Beginning Policy = iota
	End
	Timestamp
)

// Query finds the beginning, end (next offset) or first offset stored at
// or after at.
func (s *Service) Query(t model.Topic, q int32, p Policy, at time.Time) (int64, error) {
	lo, hi, err := s.Range(t, q)
	if err != nil {
		return 0, err
	}
	switch p {
	case Beginning:
		return lo, nil
	case End:
		return hi, nil
	case Timestamp:
		if at.IsZero() {
			return 0, mqerr.Errorf(mqerr.KindBadRequest, "a timestamp query needs a timestamp")
		}
		off, err := s.store.OffsetForTime(t.Name, q, at.UnixMilli())
		if err != nil {
			return 0, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "searching by time")
		}
		return off, nil
	}
	return 0, mqerr.Errorf(mqerr.KindBadRequest, "unknown offset policy %d", p)
}
