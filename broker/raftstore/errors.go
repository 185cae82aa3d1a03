package raftstore

import (
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/storage"
)

// Error sentinels; match with errors.Is.
var (
	// ErrNotLeader: this node does not lead the group; the error is a
	// *NotLeaderError naming the leader when one is known.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrLeadershipLost: the node stopped leading before the entry
	// committed. The entry may still commit under the next leader (the
	// client's message id is the dedup key if it retries); it is never
	// reported as stored.
	ErrLeadershipLost = errors.New("cluster: leadership lost before the entry committed")
	// ErrNoQuorum: no majority stored the entry (or no leader was known)
	// within the commit deadline. An entry already in the leader's raft
	// log may still commit once a majority is back; it is never reported
	// as stored.
	ErrNoQuorum = errors.New("cluster: no quorum within the commit deadline")
	// ErrStopped: the replica is closed, or stopped applying after an
	// error it cannot skip (see Replica.Failed).
	ErrStopped = errors.New("cluster: replica stopped")
	// ErrNoSpace: Apply could not write a committed entry for lack of
	// disk space. Nothing of the entry was applied and the replica has
	// not stopped: the raft loop applies the same entry again once there
	// is room. From Persist: the applied position could not be recorded
	// (it is recorded again later).
	ErrNoSpace = errors.New("cluster: no space left on the data disk")
	// ErrRefused: a change proposed through another member
	// (ProposeForwarded) that the leader refused: not a change it takes
	// from others, or one the store refuses for its content (a name not
	// found, an invalid value), which every member refuses alike.
	ErrRefused = errors.New("cluster: change refused")

	errTooLarge = storage.ErrTooLarge
)

// NotLeaderError is ErrNotLeader with the leader this node knows of
// (LeaderID 0: none known).
type NotLeaderError struct {
	LeaderID   uint64
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == 0 {
		return ErrNotLeader.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%v (leader is node %d at %s)", ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
