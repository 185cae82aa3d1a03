package restmessaging

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// idEpoch is the epoch of v1 message ids: 2021-01-01T00:00:00Z.
var idEpoch = time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)

// idSource mints message ids for REST producers that send none, in the v1
// format the official clients use, so tools that decode ids
// understand ours: 34 upper-case hex characters = 17 bytes:
//
//	0x01 | 6 bytes node (random per process, where clients use a MAC) |
//	2 bytes low half of the pid | 4 bytes seconds since 2021-01-01 UTC |
//	4 bytes sequence
//
// all big-endian.
type idSource struct {
	prefix string // "01" + node + pid, upper-case hex
	seq    atomic.Uint32
}

func newIDSource() *idSource {
	var b [8]byte
	_, _ = rand.Read(b[:6])
	binary.BigEndian.PutUint16(b[6:], uint16(os.Getpid()))
	return &idSource{prefix: "01" + strings.ToUpper(hex.EncodeToString(b[:]))}
}

// next returns a new id for a message sent at now.
func (s *idSource) next(now time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(int64(now.Sub(idEpoch)/time.Second)))
	binary.BigEndian.PutUint32(b[4:], s.seq.Add(1)-1)
	return s.prefix + strings.ToUpper(hex.EncodeToString(b[:]))
}
