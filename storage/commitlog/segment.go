package commitlog

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/storage/vfs"
)

const segSuffix = ".log"

func segName(base int64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }

// ParseSegmentName returns the base offset a segment file's name
// carries (20 digits, then ".log"); false for any other name.
func ParseSegmentName(name string) (int64, bool) { return parseSegName(name) }

func parseSegName(name string) (int64, bool) {
	if !strings.HasSuffix(name, segSuffix) || len(name) != 20+len(segSuffix) {
		return 0, false
	}
	for _, c := range name[:20] { // digits only: ParseInt takes a sign too
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(strings.TrimSuffix(name, segSuffix), 10, 64)
	return v, err == nil
}

type segment struct {
	base int64
	path string
	f    vfs.File
	// refs counts the segment list's reference plus readers'.
	refs atomic.Int32

	mapOnce sync.Once
	mm      []byte
	unmap   func() error
	mapLen  int

	// allocEnd: blocks are known to be reserved (or written) below this
	// file offset (reserve.go, allocate); 0 means unknown. Writer role.
	// allocated: the end of the blocks the writer itself reserved, for
	// ReservedAhead (any goroutine).
	allocEnd  int64
	allocated atomic.Int64

	// The reserver's progress (reserve.go): blocks below reserved are
	// reserved; rgen counts cuts of the file, which free them.
	rmu      sync.Mutex
	reserved int64
	rgen     uint64

	// dirSynced: the segment's directory entry is durable. A roll leaves
	// that to the next Sync, which makes it so before it reports anything
	// in the segment durable.
	dirSynced atomic.Bool
}

func newSegment(base int64, path string, f vfs.File, mapLen int) *segment {
	s := &segment{base: base, path: path, f: f, mapLen: mapLen}
	s.refs.Store(1)
	return s
}

// data returns the read-only mapping, or nil when the file cannot be mapped.
func (s *segment) data() []byte {
	s.mapOnce.Do(func() {
		m, ok := s.f.(vfs.Mapper)
		if !ok || s.mapLen <= 0 {
			return
		}
		b, unmap, err := m.Map(s.mapLen)
		if err != nil {
			return
		}
		s.mm, s.unmap = b, unmap
	})
	return s.mm
}

func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		// mapOnce ensures no concurrent Map; nobody else holds a reference.
		s.mapOnce.Do(func() {})
		if s.unmap != nil {
			s.unmap()
		}
		s.f.Close()
	}
}

func segPath(dir string, base int64) string { return filepath.Join(dir, segName(base)) }
