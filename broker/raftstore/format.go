package raftstore

import (
	"context"
	"errors"
	"fmt"
)

// The group's entry format. Members of different versions meet in one
// group during an upgrade, and every member must read every entry the
// same way: a member that read an entry otherwise (skipped a field it
// does not know, a kind it does not have) would hold other state than
// the others. So what entries may contain is the group's format, a
// number in the replicated state (recorded with the applied position),
// and a leader proposes only what that
// format allows:
//
//	1  appends; topics, groups, offsets, queue drops; bootstrap; barrier;
//	   set-format (proposed only once every member reads the format it
//	   sets, so no member that cannot read it meets it)
//	2  put-keys (the token key rings, keys.go)
//
// A group starts at 1 (its first members may be of different versions).
// A leader raises it (MetaSetFormat) once every member says it reads the
// higher one (the node asks them); a member that applies a set-format
// above what it reads stops and says to upgrade it, rather than go on
// reading entries it cannot. Under format F, a metadata change F does
// not allow is as undecodable as garbage: every member that reads F
// skips it alike.

// FormatVersion is the newest entry format this version reads and
// writes.
const FormatVersion = 2

// ErrFormat: a change the group's entry format does not allow yet.
var ErrFormat = errors.New("cluster: the group's entry format does not allow this change yet")

// minFormat is the least group format that allows op.
func minFormat(op *MetaOp) int {
	switch op.Kind {
	case MetaPutKeys:
		return 2
	}
	return 1
}

// Format is the group's entry format as this member applied it.
func (r *Replica) Format() int { return int(r.format.Load()) }

// applySetFormat raises the group's format to f; a format this version
// does not read stops the member. The format is recorded with the
// applied position (state.go), so that entries applied again after a
// crash are read as they were the first time.
func (r *Replica) applySetFormat(f int) error {
	if f > FormatVersion {
		return fmt.Errorf("cluster: the group's entries are of format %d from here on, and this member reads formats up to %d: "+
			"run a version of mqgate that reads format %d on this member (its raft log and store are kept)", f, FormatVersion, f)
	}
	if f <= r.st.format {
		return nil
	}
	r.st.format = f
	r.format.Store(int64(f))
	r.logger.Info("cluster: the group's entry format raised", "format", f)
	return nil
}

// RaiseFormat proposes the group's format FormatVersion unless it is at
// least that already; the caller (the leader) has checked that every
// member reads it.
func (r *Replica) RaiseFormat(ctx context.Context) error {
	if r.Format() >= FormatVersion {
		return nil
	}
	_, err := r.ProposeMeta(ctx, MetaOp{Kind: MetaSetFormat, Format: FormatVersion})
	return err
}
