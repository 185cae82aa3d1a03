package pop

import (
	"context"
	"sync"
	"time"
)

// How a change meets the journal
//
// A receive, an ack or a ChangeInvisibleDuration changes a flight in two
// steps around its journal append, which runs with no lock held (so that
// concurrent receives and acks of one subscription reach the store
// together and share its group commit):
//
//  1. Under sub.mu the operation chooses its flights and marks them
//     pending (flight.pend): new flights are put in their queue's flights
//     map (the fresh-read position moves past them, so no other receive
//     can read those offsets), a redelivered or changed flight is taken
//     out of the deadline heap and keeps its current state, the new one
//     waiting in the operation. A pending flight belongs to that
//     operation: no receive redelivers it, no renewal or release touches
//     it, and lookup refuses handles for it (KindTooManyRequests: another
//     change of that delivery is being recorded).
//  2. After the append, under sub.mu again, the operation settles its
//     flights: on success it publishes the new state (into the heap; an
//     acked flight is removed, with the FIFO follow-up); on failure the
//     flights keep the state they had, which nobody else could have
//     changed meanwhile, so nothing another operation observed is
//     rewound. New flights of a failed receive are dropped and the queue's
//     position moved back when no other receive read the queue past them;
//     otherwise they stay as undelivered messages, due at once, whose
//     next delivery is their first (epoch 0, recorded by a best-effort
//     journal record so a restart does not skip them).
//
// An offset reset may drop a pending flight; its operation then finds it
// gone from its queue and leaves it be.
//
// Snapshots: a record is in the log before its operation settles, so a
// snapshot taken in between must not count that record as reflected.
// Each operation registers the log and journal positions it starts from
// (fence) before its append and unregisters after settling; a snapshot
// replays from the lowest registered position. It writes pending flights
// in their settled-before state (a new one as an undelivered message), so
// whichever way the operation ends, replaying its record (or not finding
// it) gives the right state.

// pendKind says which change of a flight is being recorded.
type pendKind uint8

const (
	pendNew       pendKind = iota + 1 // read by a receive: delivered (or held back) once recorded
	pendRedeliver                     // chosen for its next delivery
	pendChange                        // new deadline and generation (ChangeInvisibleDuration, a repeated FIFO attempt)
	pendAck                           // acknowledged: removed once recorded
)

// fence tracks the journal records being written whose changes are not
// yet settled in memory.
type fence struct {
	mu   sync.Mutex // guards what follows
	seq  uint64
	open map[uint64]fencePos
}

// fencePos: the log end and the journal's next queue offset read before a
// record was appended; the record lands at or after both.
type fencePos struct{ log, journal int64 }

// beginRecord registers a record about to be appended; endRecord once
// its change is settled. They take s.fence.mu, a leaf, and may be called
// with sub.mu held.
func (s *Service) beginRecord() uint64 {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	_, j := s.store.QueueRange(JournalTopic, 0)
	_, w := s.store.LogRange()
	s.fence.seq++
	if s.fence.open == nil {
		s.fence.open = make(map[uint64]fencePos)
	}
	s.fence.open[s.fence.seq] = fencePos{log: w, journal: j}
	return s.fence.seq
}

func (s *Service) endRecord(id uint64) {
	s.fence.mu.Lock()
	delete(s.fence.open, id)
	s.fence.mu.Unlock()
}

// snapshotFloor returns the positions a snapshot started now reflects
// everything before: the log end and the journal's next offset, or the
// positions of the oldest record still being settled. The log position
// is at most what the store has dispatched, so every topic deletion below
// it is known to LastDeletion (undeletedSubs); what is replayed again
// because of it changes nothing.
func (s *Service) snapshotFloor() (logPos, jnext int64) {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	_, jnext = s.store.QueueRange(JournalTopic, 0)
	logPos = s.store.DispatchedUpTo()
	for _, p := range s.fence.open {
		logPos = min(logPos, p.log)
		jnext = min(jnext, p.journal)
	}
	return logPos, jnext
}

// holds reports whether f is still its queue's flight at its offset (an
// offset reset drops flights, pending ones too).
func (sb *sub) holds(f *flight) bool {
	q := sb.queues[f.queue]
	return q != nil && q.flights[f.offset] == f
}

// snapState is what a snapshot writes for f: a pending new flight as the
// undelivered message it is until its record is settled.
func (f *flight) snapState() fstate {
	st := f.state()
	if f.pend == pendNew && !f.held() {
		st = returnedState(st, f.renewFrom)
	}
	return st
}

// returnedState is a new flight whose delivery was not recorded: due at
// at, and delivered next as its first attempt. Same generation, so the
// delivery's record, if replayed over a snapshot, supersedes it (a higher
// epoch).
func returnedState(st fstate, at int64) fstate {
	st.epoch = 0
	st.visibleAt = at
	st.flags &^= flagAutoRenew
	st.client = ""
	st.renewN = 0
	return st
}

// reservation is the stretch of one queue a receive read: its position
// before and after, and the queue's reset count.
type reservation struct {
	queue    int32
	from, to int64
	resets   uint32
}

// settlePicks publishes (ok) or withdraws the redeliveries and repeated
// deliveries of a receive, and copies what is delivered into each pick.
// sb.mu must be held.
func (sb *sub) settlePicks(picks []pick, ok bool) {
	for i := range picks {
		p := &picks[i]
		f := p.f
		if f.pend == pendRedeliver || f.pend == pendChange {
			f.pend = 0
			if sb.holds(f) {
				if ok {
					f.setState(p.to)
				}
				sb.setDeadline(f, f.visibleAt)
			} else if ok {
				f.setState(p.to) // dropped by a reset: its handle will say so
			}
		}
		p.v = f.state()
	}
}

// settleNew publishes the new flights of a receive whose record was
// written.
// sb.mu must be held.
func (sb *sub) settleNew(created []*flight) {
	for _, f := range created {
		if f.pend != pendNew {
			continue
		}
		f.pend = 0
		if sb.holds(f) && !f.held() {
			sb.setDeadline(f, f.visibleAt)
		}
	}
}

// abandonNew withdraws the new flights of a receive whose record could
// not be written. A queue nobody read past them (and not reset since)
// gets its position back and the flights are forgotten; otherwise they
// stay as undelivered messages due at now (held ones stay held), which
// abandonNew returns for the caller to record.
// sb.mu must be held.
func (sb *sub) abandonNew(created []*flight, resv []reservation, now int64) (returned []*flight) {
	rewound := make(map[int32]bool, len(resv))
	for _, r := range resv {
		if q := sb.queues[r.queue]; q != nil && q.resets == r.resets && q.next == r.to {
			q.next = r.from
			rewound[r.queue] = true
		}
	}
	detached := false
	for _, f := range created {
		if f.pend != pendNew {
			continue
		}
		f.pend = 0
		switch {
		case !sb.holds(f):
		case rewound[f.queue]:
			sb.detach(f)
			detached = true
		case f.held():
			returned = append(returned, f)
		default:
			// One generation up: a record of the failed delivery that
			// reached the log after all (an append given up on its
			// context may still be written) is superseded on replay by
			// the one recordReturned writes.
			st := returnedState(f.state(), now)
			st.gen++
			f.setState(st)
			sb.setDeadline(f, now)
			returned = append(returned, f)
		}
	}
	if detached {
		// A message group whose active flight this call created may have
		// held ones of other calls behind it.
		sb.releaseHeld(now)
	}
	return returned
}

// returnTimeout bounds the append recording the messages of a failed
// receive as undelivered.
const returnTimeout = 5 * time.Second

// recordReturned appends the state abandonNew left for messages a failed
// receive read: without it, a restart would take the position the other
// receives recorded and skip them. A failure is logged: the messages stay
// due in memory and are recorded when next delivered.
func (s *Service) recordReturned(ctx context.Context, sb *sub, returned []*flight, at int64) {
	rec := jrecord{op: opDeliver, group: sb.group, topic: sb.topic, at: at}
	sb.mu.Lock()
	for _, f := range returned {
		if sb.holds(f) && f.pend == 0 {
			rec.entries = append(rec.entries, entryOf(f))
		}
	}
	sb.mu.Unlock()
	if len(rec.entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), returnTimeout)
	defer cancel()
	if err := s.journal(ctx, &rec); err != nil {
		s.log.Warn("pop: recording messages of a failed receive as undelivered failed; a restart before their next delivery skips them",
			"group", sb.group, "topic", sb.topic, "messages", len(rec.entries), "err", err)
	}
}
