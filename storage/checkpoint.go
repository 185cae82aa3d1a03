package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

// checkpoint is the small file that bounds recovery work.
//
//	0  4 magic "MQGK"   4  4 version (1)
//	8  8 log flushed    every byte below is fsynced and valid (scan start)
//	16 8 dispatched     every consume-queue/index entry below is fsynced
//	24 8 log end        the log end at the time (== flushed on clean close)
//	32 8 last store time
//	40 4 clean (1 if written by a clean Close, else 0)
//	44 4 CRC32C of [0,44)
type checkpoint struct {
	Flushed, Dispatched, LogEnd, LastStoreTime int64
	Clean                                      bool
}

const (
	checkpointFile = "checkpoint"
	runningFile    = "RUNNING"
	lockFile       = "LOCK"
	cpSize         = 48
	cpMagic        = uint32('M') | uint32('Q')<<8 | uint32('G')<<16 | uint32('K')<<24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c checkpoint) encode() []byte {
	b := make([]byte, cpSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], cpMagic)
	le.PutUint32(b[4:], 1)
	le.PutUint64(b[8:], uint64(c.Flushed))
	le.PutUint64(b[16:], uint64(c.Dispatched))
	le.PutUint64(b[24:], uint64(c.LogEnd))
	le.PutUint64(b[32:], uint64(c.LastStoreTime))
	if c.Clean {
		le.PutUint32(b[40:], 1)
	}
	le.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	le := binary.LittleEndian
	if len(b) != cpSize || le.Uint32(b[0:]) != cpMagic || le.Uint32(b[4:]) != 1 || le.Uint32(b[40:]) > 1 ||
		le.Uint32(b[44:]) != crc32.Checksum(b[:44], castagnoli) {
		return checkpoint{}, fmt.Errorf("%w: checkpoint file", serr.ErrCorrupt)
	}
	return checkpoint{
		Flushed: int64(le.Uint64(b[8:])), Dispatched: int64(le.Uint64(b[16:])),
		LogEnd: int64(le.Uint64(b[24:])), LastStoreTime: int64(le.Uint64(b[32:])),
		Clean: le.Uint32(b[40:]) == 1,
	}, nil
}

// readCheckpoint returns the checkpoint, or ok=false if missing or damaged
// (then recovery validates and re-dispatches the whole log).
func readCheckpoint(fs vfs.FS, dir string) (checkpoint, bool) {
	b, err := vfs.ReadFile(fs, filepath.Join(dir, checkpointFile))
	if err != nil {
		return checkpoint{}, false
	}
	c, err := decodeCheckpoint(b)
	return c, err == nil
}

func writeCheckpoint(fs vfs.FS, dir string, c checkpoint) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, checkpointFile), c.encode())
}
