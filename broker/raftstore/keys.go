package raftstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/keyring"
	"github.com/mqgate/mqgate/broker/pop"
)

// The keys that sign what clients keep (receipt handles, transaction
// ids, recall handles) are the group's: a token any leader signed is
// valid on every member, so a client carries on across a failover. The
// receipt-handle key comes with the bootstrap (format 1); from format 2
// on, MetaPutKeys replicates all three rings (broker/keyring), and a
// leader rotates them: a new key signs from then on, the previous ones
// stay in the ring (verifying the tokens they signed) for two rotation
// periods, far longer than any token lives (an invisible duration, a
// delay of at most a day, a transaction's check-backs).

// keyBlobs are the rings the group replicates, by blob name.
var keyBlobs = []string{pop.KeyBlob, deferred.TxnKeyBlob, deferred.RecallKeyBlob}

// keysBlob marks that the rings are the group's (a MetaPutKeys applied).
const keysBlob = "cluster-keys"

func checkKeys(keys map[string][]byte) error {
	if len(keys) == 0 {
		return errors.New("no key ring")
	}
	for name, b := range keys {
		if !slices.Contains(keyBlobs, name) {
			return fmt.Errorf("%q is not a key ring", name)
		}
		if _, err := keyring.Decode(b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// applyPutKeys saves the rings, then the marker.
func (r *Replica) applyPutKeys(keys map[string][]byte) error {
	m := r.store.Meta()
	for _, name := range keyBlobs {
		if b, ok := keys[name]; ok {
			if err := m.SaveBlob(name, b); err != nil {
				return err
			}
		}
	}
	return m.SaveBlob(keysBlob, []byte("1"))
}

// KeysReplicated reports whether the token key rings are the group's.
func (r *Replica) KeysReplicated() bool {
	_, ok, err := r.store.Meta().LoadBlob(keysBlob)
	return err == nil && ok
}

// ring reads the key ring name as this member holds it (a key of an
// older version as a ring of one); ok is false when there is none.
func (r *Replica) ring(name string) (keyring.Ring, bool, error) {
	m := r.store.Meta()
	if _, ok, err := m.LoadBlob(name); err != nil || !ok {
		return nil, false, err
	}
	var ring keyring.Ring
	var err error
	if name == pop.KeyBlob {
		ring, err = pop.LoadKeyRing(m, false)
	} else {
		ring, err = deferred.LoadRing(m, name, false)
	}
	return ring, err == nil, err
}

// EnsureKeys makes the token key rings the group's, once the group's
// format allows it (a no-op before, and after it was done): the leader
// proposes the rings it holds (so that the tokens it signed stay valid),
// and new ones for those it lacks. The leader calls it before it serves.
func (r *Replica) EnsureKeys(ctx context.Context, now time.Time) error {
	if r.Format() < 2 || r.KeysReplicated() {
		return nil
	}
	keys := map[string][]byte{}
	for _, name := range keyBlobs {
		ring, ok, err := r.ring(name)
		if err != nil {
			return err
		}
		if !ok {
			k, err := keyring.NewKey(now)
			if err != nil {
				return err
			}
			ring = keyring.Ring{k}
		}
		for i := range ring {
			if ring[i].Created == 0 { // an older version's key: its age starts now
				ring[i].Created = now.UnixMilli()
			}
		}
		keys[name] = ring.Encode()
	}
	_, err := r.ProposeMeta(ctx, MetaOp{Kind: MetaPutKeys, Keys: keys})
	return err
}

// RotateKeys puts a new key at the head of every replicated ring whose
// newest key is older than every, dropping keys older than two periods;
// it reports whether it rotated any. The leader calls it now and then
// and, when it did, has its services reload the rings.
func (r *Replica) RotateKeys(ctx context.Context, now time.Time, every time.Duration) (bool, error) {
	if every <= 0 || r.Format() < 2 || !r.KeysReplicated() {
		return false, nil
	}
	keys := map[string][]byte{}
	for _, name := range keyBlobs {
		ring, ok, err := r.ring(name)
		if err != nil {
			return false, fmt.Errorf("cluster: key ring %s: %w", name, err)
		}
		if !ok {
			return false, fmt.Errorf("cluster: key ring %s is missing", name)
		}
		if now.Sub(time.UnixMilli(ring.Newest().Created)) < every {
			continue
		}
		k, err := keyring.NewKey(now)
		if err != nil {
			return false, err
		}
		keys[name] = ring.Rotated(k, now.Add(-2*every).UnixMilli()).Encode()
	}
	if len(keys) == 0 {
		return false, nil
	}
	if _, err := r.ProposeMeta(ctx, MetaOp{Kind: MetaPutKeys, Keys: keys}); err != nil {
		return false, err
	}
	return true, nil
}
