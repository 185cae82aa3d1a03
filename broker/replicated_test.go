package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/raftstore"
)

// A write the replica group refused was not stored: it must be classified
// as a replication outcome (clients retry it; the listeners answer
// SLAVE_PERSISTENCE_TIMEOUT or HA_NOT_AVAILABLE), never as an internal
// or unavailable error — in particular the refusal of a leader that was
// deposed while frozen and answers after it resumes.
func TestReplicationErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want mqerr.Kind
	}{
		{&raftstore.NotLeaderError{LeaderID: 2, LeaderAddr: "127.0.0.1:7002"}, mqerr.KindReplicationLost},
		{&raftstore.NotLeaderError{}, mqerr.KindReplicationLost},
		{fmt.Errorf("append: %w", raftstore.ErrLeadershipLost), mqerr.KindReplicationLost},
		{fmt.Errorf("%w: not committed within 3s", raftstore.ErrNoQuorum), mqerr.KindNoQuorum},
		{raftstore.ErrStopped, mqerr.KindNoQuorum},
	} {
		got := replicationError(tc.err)
		if k := mqerr.KindOf(got); k != tc.want {
			t.Errorf("%v: kind %v, want %v", tc.err, k, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%v: the cause is not kept: %v", tc.err, got)
		}
	}
}
