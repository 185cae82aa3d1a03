package pop

import "time"

// Where a message stands for a group (MessageState).
const (
	StateNotDelivered = "NOT_DELIVERED"       // the group has not read it yet
	StateInFlight     = "IN_FLIGHT"           // delivered, not acknowledged, invisible until VisibleAt
	StateRedelivering = "AWAITING_REDELIVERY" // its invisible time passed: it goes out again
	StateHeld         = "HELD"                // FIFO: read, held back behind its message group
	StateDone         = "DONE"                // acknowledged, or moved to the dead-letter queue
)

// MessageState is where one message stands for one group.
type MessageState struct {
	State string
	// Attempt is the current delivery's attempt (IN_FLIGHT,
	// AWAITING_REDELIVERY), 0 otherwise.
	Attempt uint32
	// VisibleAt is when an IN_FLIGHT message becomes visible again.
	VisibleAt time.Time
}

// StateOf reports where the message at offset of topic's queue stands for
// group; ok is false when the group never received from that queue.
func (s *Service) StateOf(group, topic string, queue int32, offset int64) (st MessageState, ok bool) {
	sb := s.getSub(group, topic, false)
	if sb == nil {
		return st, false
	}
	now := s.now()
	sb.mu.Lock()
	defer sb.mu.Unlock()
	q := sb.queues[queue]
	if q == nil || q.next < 0 {
		return st, false
	}
	f := q.flights[offset]
	switch {
	case f != nil && f.held():
		st.State = StateHeld
	case f != nil && now < f.visibleAt:
		st = MessageState{State: StateInFlight, Attempt: f.epoch, VisibleAt: time.UnixMilli(f.visibleAt)}
	case f != nil:
		st = MessageState{State: StateRedelivering, Attempt: f.epoch}
	case offset < q.next:
		st.State = StateDone
	default:
		st.State = StateNotDelivered
	}
	return st, true
}
