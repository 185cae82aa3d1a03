package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Group commit of appends: the Appends that come while raft's loop is
// busy (writing its log, applying) are proposed together, as one entry,
// built when the loop takes the proposal (Raft.Propose calls build then).
// An entry thus carries the messages of every Append that came since
// the last one (each Append's messages contiguous, in the order the
// Appends came), and every member writes, fsyncs, sends and applies one
// entry where it would have handled one per Append. Nothing waits for
// company: an Append that comes while the loop is idle is proposed at
// once, alone.
//
// The entry is an ordinary append entry under one sequence number; its
// outcome is split among the Appends it carries (each gets the receipts
// of its own messages). The store refuses a batch whole (ErrInvalid,
// ErrTooLarge) when any of its messages is refused, so an Append whose
// merged entry was refused is proposed again alone: it gets the answer
// it would have had alone, and the others are not refused for it.

// maxMergedEntry bounds the bytes of the messages one merged entry
// carries (an Append larger than this is proposed alone), so that an
// entry stays well within raft's message size (MaxSizePerMsg).
const maxMergedEntry = 512 << 10

// appendReq is one Append waiting for the group commit.
type appendReq struct {
	msgs []*message.Message
	size int // the encoded size of msgs in an entry
	ctx  context.Context
	out  chan applyResult // the outcome (buffered: sent once)
	// batch is set, under gmu, when the proposer takes the request.
	batch *appendBatch
}

// appendBatch is the requests one entry carries.
type appendBatch struct {
	seq  uint64
	reqs []*appendReq
	// waiting counts the requests still waiting for the outcome; the
	// last one to give up drops the entry's waiter.
	waiting   atomic.Int32
	uncertain sync.Once
}

// appendQueued proposes msgs through the group commit and waits for the
// outcome (Append's contract; the waits are propose's: the commit timeout,
// or with AwaitOutcome ctx's deadline).
func (r *Replica) appendQueued(ctx context.Context, msgs []*message.Message, size int) (storage.AppendResult, error) {
	req := &appendReq{msgs: msgs, size: size, ctx: ctx, out: make(chan applyResult, 1)}
	await, _ := ctx.Value(awaitKey{}).(bool)
	var giveUp <-chan time.Time
	if !await {
		t := time.NewTimer(r.opts.CommitTimeout)
		defer t.Stop()
		giveUp = t.C
	} else if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		giveUp = t.C
	}
	if err := r.enqueue(req); err != nil {
		return storage.AppendResult{}, err
	}
	done := ctx.Done()
	for {
		select {
		case res := <-req.out:
			if req.batch != nil && len(req.batch.reqs) > 1 && (errors.Is(res.err, storage.ErrInvalid) || errors.Is(res.err, storage.ErrTooLarge)) {
				// Refused for some message of the merged entry, which
				// every member skipped: ask again alone.
				return r.appendAlone(ctx, msgs)
			}
			return res.res, res.err
		case <-done:
			if r.withdraw(req) {
				return storage.AppendResult{}, ctx.Err()
			}
			// Taken already: the outcome comes, whatever ctx does.
			done = nil
		case <-giveUp:
			if r.withdraw(req) {
				return storage.AppendResult{}, fmt.Errorf("%w: not handed to raft in time", ErrNoQuorum)
			}
			// Taken: raft may have the entry, and it may still commit.
			b := req.batch
			if b.waiting.Add(-1) == 0 {
				r.dropWaiter(b.seq)
			}
			if await {
				b.uncertain.Do(r.markUncertain)
				return storage.AppendResult{}, fmt.Errorf("%w: not committed in time (it may still be)", ErrNoQuorum)
			}
			return storage.AppendResult{}, fmt.Errorf("%w: not committed within %v (it may still be)", ErrNoQuorum, r.opts.CommitTimeout)
		}
	}
}

// enqueue queues req for the proposer, starting it if it is not running.
func (r *Replica) enqueue(req *appendReq) error {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	if r.gclosed {
		return ErrStopped
	}
	r.gqueue = append(r.gqueue, req)
	if !r.gproposing {
		r.gproposing = true
		r.gwg.Add(1)
		go r.proposeQueued()
	}
	return nil
}

// withdraw takes req out of the queue if the proposer has not taken it;
// it reports whether it did.
func (r *Replica) withdraw(req *appendReq) bool {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	if req.batch != nil {
		return false
	}
	for i, q := range r.gqueue {
		if q == req {
			r.gqueue = append(r.gqueue[:i], r.gqueue[i+1:]...)
			break
		}
	}
	return true
}

// proposeQueued proposes the queued requests, until the queue is empty,
// then ends (the next enqueue starts it again). One runs at a time. Each
// proposal's entry is built when raft's loop takes it, from the requests
// queued then (takeBatch), so that those that came while the loop was
// busy share it.
func (r *Replica) proposeQueued() {
	defer r.gwg.Done()
	for {
		r.gmu.Lock()
		if len(r.gqueue) == 0 {
			r.gproposing = false
			r.gmu.Unlock()
			return
		}
		r.gmu.Unlock()
		r.proposeNext()
	}
}

// proposeNext proposes one entry of queued requests and answers them when
// raft refuses it; its apply answers them otherwise (deliver).
func (r *Replica) proposeNext() {
	rp := r.raft.Load()
	if r.closed.Load() || r.Failed() != nil || rp == nil {
		r.failQueued(ErrStopped)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.CommitTimeout)
	defer cancel()
	var b *appendBatch
	term := r.fence.Load()
	err := (*rp).Propose(ctx, term, func() []byte {
		b = r.takeBatch(term)
		if b == nil {
			return nil
		}
		data, err := r.encodeBatch(b)
		if err != nil {
			b.fail(fmt.Errorf("cluster: append: %w", err))
			b = nil
			return nil
		}
		r.mu.Lock()
		r.waiters[b.seq] = b.deliver
		r.mu.Unlock()
		return data
	})
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrNoQuorum, err)
	}
	if b != nil {
		// Built, and refused: raft does not have it.
		r.dropWaiter(b.seq)
		b.fail(err)
		return
	}
	// Never built (no leader here, or none in time): none of the queued
	// requests can be proposed now.
	r.failQueued(err)
}

// takeBatch takes the requests of the next entry, proposed for leader
// term term, from the queue (nil when it is empty). A request made for
// another term (ForTerm) is answered as not leading, and left out.
func (r *Replica) takeBatch(term uint64) *appendBatch {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	if term != 0 {
		kept := r.gqueue[:0]
		for _, q := range r.gqueue {
			if t, ok := TermOf(q.ctx); ok && t != term {
				q.answer(applyResult{err: fmt.Errorf("%w: the append is for leader term %d, this member's services are of term %d now", ErrNotLeader, t, term)})
				continue
			}
			kept = append(kept, q)
		}
		clear(r.gqueue[len(kept):])
		r.gqueue = kept
	}
	if len(r.gqueue) == 0 {
		return nil
	}
	b := &appendBatch{}
	size := 0
	n := 0
	for _, q := range r.gqueue {
		if n > 0 && size+q.size > maxMergedEntry {
			break
		}
		size += q.size
		n++
	}
	b.reqs = append([]*appendReq(nil), r.gqueue[:n]...)
	clear(r.gqueue[:n])
	r.gqueue = r.gqueue[n:]
	for _, q := range b.reqs {
		q.batch = b
	}
	b.waiting.Store(int32(len(b.reqs)))
	return b
}

// encodeBatch encodes b's requests as one append entry under a new
// sequence number.
func (r *Replica) encodeBatch(b *appendBatch) ([]byte, error) {
	msgs := b.reqs[0].msgs
	if len(b.reqs) > 1 {
		msgs = nil
		for _, q := range b.reqs {
			msgs = append(msgs, q.msgs...)
		}
	}
	b.seq = r.seq.Add(1)
	return encodeAppend(&appendEntry{proposer: r.incarnation, seq: b.seq, storeTime: r.stamp(), geo: r.geo, storeHost: r.opts.StoreHost, msgs: msgs}, r.maxRecord())
}

// failQueued answers every queued request with err.
func (r *Replica) failQueued(err error) {
	r.gmu.Lock()
	queued := r.gqueue
	r.gqueue = nil
	r.gmu.Unlock()
	for _, q := range queued {
		q.answer(applyResult{err: err})
	}
}

// fail answers every request of b with err.
func (b *appendBatch) fail(err error) {
	for _, q := range b.reqs {
		q.answer(applyResult{err: err})
	}
}

// answer hands req its outcome; only the first counts (a request whose
// leader stepped down while its entry was being handed over may be
// answered twice).
func (q *appendReq) answer(res applyResult) {
	select {
	case q.out <- res:
	default:
	}
}

// deliver splits the outcome of b's entry among its requests: each gets
// the receipts of its own messages, and the log end after its last one.
// Called with the replica's mu held (answer, LeadershipLost).
func (b *appendBatch) deliver(res applyResult) {
	if res.err != nil || len(b.reqs) == 1 {
		for _, q := range b.reqs {
			q.answer(res)
		}
		return
	}
	ents := res.res.Entries
	for _, q := range b.reqs {
		n := min(len(q.msgs), len(ents))
		own := res.res
		own.Entries = ents[:n:n]
		if n > 0 {
			last := own.Entries[n-1]
			own.End = last.PhysOffset + int64(last.Size)
		}
		ents = ents[n:]
		q.answer(applyResult{res: own})
	}
}

// dropWaiter forgets the waiter of entry seq (no caller waits for it).
func (r *Replica) dropWaiter(seq uint64) {
	r.mu.Lock()
	delete(r.waiters, seq)
	r.mu.Unlock()
}

// stopQueue answers the queued appends ErrStopped, refuses new ones and
// waits for the proposer to end (the raft node has stopped: a proposal
// being handed over fails).
func (r *Replica) stopQueue() {
	r.gmu.Lock()
	r.gclosed = true
	r.gmu.Unlock()
	r.failQueued(ErrStopped)
	r.gwg.Wait()
}
