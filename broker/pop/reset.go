package pop

import (
	"context"
	"slices"
)

// resetQueue drops every flight of queue id (without FIFO follow-up: the
// caller releases held message groups) and sets its fresh-read position.
// sb.mu must be held (or the state not yet shared: replay).
func (sb *sub) resetQueue(id int32, next int64) []*flight {
	q := sb.q(id)
	dropped := make([]*flight, 0, len(q.flights))
	for _, f := range q.flights {
		dropped = append(dropped, f)
	}
	for _, f := range dropped {
		sb.detach(f)
	}
	q.next = next
	q.resets++
	return dropped
}

// releaseHeld makes the first held flight of every FIFO message group
// with nothing in flight due at now.
// sb.mu must be held.
func (sb *sub) releaseHeld(now int64) {
	for g, list := range sb.held {
		if sb.active[g] == 0 && len(list) > 0 {
			sb.unhold(list[0], now)
		}
	}
}

// Reset moves the group's fresh-read position in topic to next[q] for each
// queue q given, and drops the group's deliveries in flight on those
// queues: their handles stop working, and only messages at or after the
// new position are delivered (again). A FIFO message group held behind a
// dropped delivery is released. It returns each queue's previous position
// (-1: never read, which means the queue's first retained message).
//
// Like an ack, the change is applied in memory, then recorded in the
// journal; if recording fails it is undone as far as nothing happened
// since, and the error returned.
//
// A message delivered again after the reset counts its deliveries and
// generations from the start again, so a handle issued before the reset
// can carry the same numbers as the new delivery's. lookup tells them
// apart by the handle's issue time, which must not be before the time the
// current delivery began (flight.renewFrom, kept in snapshots and set from
// the delivery's journal record on replay). Both are wall-clock
// milliseconds, so a delivery made in the reset's own millisecond is dated
// a millisecond later (sub.resetAt, tryPop): every handle issued before
// the reset is then older than every delivery made after it.
func (s *Service) Reset(ctx context.Context, group, topic string, next map[int32]int64) (map[int32]int64, error) {
	sb := s.getSub(group, topic, true)
	now := s.now()
	rec := jrecord{op: opReset, group: group, topic: topic, at: now}
	queues := make([]int32, 0, len(next))
	for q := range next {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	prev := make(map[int32]int64, len(next))
	var dropped []*flight
	sb.mu.Lock()
	for _, q := range queues {
		prev[q] = sb.q(q).next
		dropped = append(dropped, sb.resetQueue(q, next[q])...)
		rec.nexts = append(rec.nexts, qnext{q, next[q]})
	}
	sb.releaseHeld(now)
	prevResetAt := sb.resetAt
	sb.resetAt = max(sb.resetAt, now)
	s.scheduleLocked(sb)
	sb.mu.Unlock()
	s.hub.Notify(sb.key)
	if err := s.journal(ctx, &rec); err != nil {
		sb.mu.Lock()
		for _, f := range dropped {
			if sb.q(f.queue).flights[f.offset] == nil {
				f.hidx = -1
				sb.add(f)
			}
		}
		for _, q := range queues {
			if qs := sb.q(q); qs.next == next[q] {
				qs.next = prev[q]
			}
		}
		if sb.resetAt == max(prevResetAt, now) {
			sb.resetAt = prevResetAt
		}
		s.scheduleLocked(sb)
		sb.mu.Unlock()
		return nil, err
	}
	s.log.Info("pop: group position reset", "group", group, "topic", topic, "queues", len(queues), "dropped_in_flight", len(dropped))
	return prev, nil
}

// Position is where the group stands in a queue of topic: its first
// message still in flight, else the first offset it never read. ok is
// false when it never received from the queue.
func (s *Service) Position(group, topic string, queue int32) (pos int64, ok bool) {
	sb := s.getSub(group, topic, false)
	if sb == nil {
		return 0, false
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	q := sb.queues[queue]
	if q == nil || q.next < 0 {
		return 0, false
	}
	pos = q.next
	for off := range q.flights {
		pos = min(pos, off)
	}
	return pos, true
}
