package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The disk reserve.
//
// New messages are refused while the file system holding the store has
// less free space than the reserve (Options.DiskReserve and
// DiskReservePercent), so that the writes consumers need to drain the
// store always find room: their POP journal records (receives, acks,
// changes of invisibility: ordinary records of this log), metadata
// snapshots and committed offsets, the consume-queue and index files
// those records grow, and blocks for the log itself. The store refuses
// nothing itself: the broker asks CheckSpace before it stores a new
// message, and every other write goes ahead until the disk is really
// full.
//
// Free space is the file system's (statfs: what an unprivileged process
// may still take) plus the blocks the log holds reserved ahead of its
// records in the active segment (ReservedAhead), which it fills without
// taking more. The background loop looks it up every spaceMaxAge, so
// another process filling the disk is noticed within that; CheckSpace
// looks again (at most every spaceMinGap) only once what was appended
// since the last look may have used the headroom above the reserve up.
// So a send costs two atomic loads and no clock read.

// DefaultDiskReserve and DefaultDiskReservePercent are the reserve's
// defaults: the larger of 1 GiB and 5% of the file system.
const (
	DefaultDiskReserve        = 1 << 30
	DefaultDiskReservePercent = 5
)

const (
	spaceMaxAge = time.Second
	spaceMinGap = 10 * time.Millisecond
)

// Space is the free space of the store's file system against the disk
// reserve, as of a recent look.
type Space struct {
	Total uint64 // size of the file system, bytes
	// Free is what the store can still write: the file system's free
	// space plus the blocks the log holds reserved ahead of its records.
	Free    uint64
	Reserve uint64 // the disk reserve (0: none)
	// Refused counts the CheckSpace calls that refused, since Open.
	Refused uint64
	// Err is why the free space could not be read (then nothing is
	// refused).
	Err error
}

// Low reports whether less than the reserve is free: new messages are
// refused.
func (sp Space) Low() bool { return sp.Err == nil && sp.Reserve > 0 && sp.Free < sp.Reserve }

// space is the Store's view of its free space.
type space struct {
	mu      sync.Mutex // one look at a time
	last    atomic.Pointer[spaceLook]
	refused atomic.Uint64
	low     bool // under mu: the last look was below the reserve (logged once per change)
}

type spaceLook struct {
	at       time.Duration // since the store's epoch
	appended uint64        // the append byte counter before the look
	Space
}

// sinceEpoch is the time since the store's epoch on Options.Now's clock,
// or the monotonic clock.
func (s *Store) sinceEpoch() time.Duration {
	if s.opts.Now != nil {
		return s.opts.Now().Sub(s.epoch)
	}
	return time.Since(s.epoch)
}

// reserveOff reports whether the reserve is turned off.
func (s *Store) reserveOff() bool { return s.opts.DiskReserve < 0 && s.opts.DiskReservePercent < 0 }

// reserveFor is the reserve on a file system of total bytes.
func (s *Store) reserveFor(total uint64) uint64 {
	var r uint64
	if s.opts.DiskReserve > 0 {
		r = uint64(s.opts.DiskReserve)
	}
	if p := s.opts.DiskReservePercent; p > 0 {
		r = max(r, uint64(float64(total)*p/100))
	}
	return r
}

// look returns the last look at the free space when it is younger than
// maxAge, else a new one. A caller that finds another looking takes the
// last look rather than wait.
func (s *Store) look(maxAge time.Duration) *spaceLook {
	sp := &s.space
	l := sp.last.Load()
	if l != nil && s.sinceEpoch()-l.at < maxAge {
		return l
	}
	if !sp.mu.TryLock() {
		if l != nil {
			return l
		}
		sp.mu.Lock()
	}
	defer sp.mu.Unlock()
	if l2 := sp.last.Load(); l2 != l && l2 != nil && s.sinceEpoch()-l2.at < maxAge {
		return l2 // looked meanwhile
	}
	nl := &spaceLook{appended: s.c.appendBytes.Load()}
	u, err := s.fs.Usage(s.dir)
	nl.at = s.sinceEpoch()
	if err != nil {
		nl.Err = err
	} else {
		nl.Total, nl.Free, nl.Reserve = u.Total, u.Free+uint64(s.log.ReservedAhead()), s.reserveFor(u.Total)
	}
	sp.last.Store(nl)
	if low := nl.Low(); low != sp.low {
		sp.low = low
		if low {
			s.logger.Warn("storage: free space below the disk reserve: new messages are refused until space is freed; consumers still receive and acknowledge",
				"dir", s.dir, "free", nl.Free, "reserve", nl.Reserve, "total", nl.Total)
		} else {
			s.logger.Info("storage: free space above the disk reserve again: new messages are accepted",
				"dir", s.dir, "free", nl.Free, "reserve", nl.Reserve)
		}
	}
	return nl
}

// CheckSpace reports whether a new message may be stored: nil, or an
// error wrapping ErrDiskFull while less than the disk reserve is free.
// The broker calls it before it stores a message a client sent; the
// writes consumers and the store itself make are never refused (see the
// comment at the top of this file). A free space that cannot be read
// refuses nothing. Cheap: two atomic loads while the last look leaves
// room; the background loop looks at the file system once a second.
func (s *Store) CheckSpace() error {
	if s.reserveOff() {
		return nil
	}
	l := s.space.last.Load() // Open looked
	if l.Err == nil && l.Free >= l.Reserve && l.Free-l.Reserve > s.c.appendBytes.Load()-l.appended {
		return nil // what was appended since the look cannot have used the headroom up
	}
	if l = s.look(spaceMinGap); !l.Low() {
		return nil
	}
	s.space.refused.Add(1)
	return fmt.Errorf("%w: %s free on the data disk, below its reserve of %s", ErrDiskFull, FormatBytes(l.Free), FormatBytes(l.Reserve))
}

// Space reports the free space against the disk reserve as of a look at
// most a second old.
func (s *Store) Space() Space {
	sp := s.look(spaceMaxAge).Space
	sp.Refused = s.space.refused.Load()
	return sp
}

// FormatBytes writes n in binary units with one decimal, rounded down so
// that a figure just below another never prints as equal to it (512 B,
// 1.5 MiB, 7.9 MiB for 8 MiB less a byte).
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	tenths := n/div*10 + n%div*10/div // floor, in tenths of the unit
	return fmt.Sprintf("%d.%d %ciB", tenths/10, tenths%10, "KMGTPE"[exp])
}
