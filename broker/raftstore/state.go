package raftstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/mqgate/mqgate/storage/vfs"
)

// appliedState is what the replica records, after fsyncing the commit
// log, about how far it applied the raft log: the index of the last
// applied entry, the commit-log end after it, and the last store time
// applied (store times are kept monotonic across leaders by the apply
// step, so a replica that applies again from here must start from it),
// and the group's entry format then (format.go: how the entries after
// it are read).
type appliedState struct {
	index     uint64
	logEnd    int64
	storeTime int64
	format    int
}

const (
	stateFile   = "applied"
	stateMagic  = "MQA2"
	stateSize   = 4 + 8 + 8 + 8 + 1 + 4
	stateMagic1 = "MQA1" // without the format (1)
	stateSize1  = 4 + 8 + 8 + 8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeState(s appliedState) []byte {
	b := make([]byte, 0, stateSize)
	b = append(b, stateMagic...)
	b = binary.BigEndian.AppendUint64(b, s.index)
	b = binary.BigEndian.AppendUint64(b, uint64(s.logEnd))
	b = binary.BigEndian.AppendUint64(b, uint64(s.storeTime))
	b = append(b, byte(s.format))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeState(b []byte) (appliedState, error) {
	size := stateSize
	switch {
	case len(b) == stateSize1 && string(b[:4]) == stateMagic1:
		size = stateSize1
	case len(b) != stateSize || string(b[:4]) != stateMagic:
		return appliedState{}, fmt.Errorf("cluster: applied state: %d bytes, not a state record", len(b))
	}
	if crc32.Checksum(b[:size-4], castagnoli) != binary.BigEndian.Uint32(b[size-4:]) {
		return appliedState{}, fmt.Errorf("cluster: applied state: checksum mismatch")
	}
	s := appliedState{
		index:     binary.BigEndian.Uint64(b[4:]),
		logEnd:    int64(binary.BigEndian.Uint64(b[12:])),
		storeTime: int64(binary.BigEndian.Uint64(b[20:])),
		format:    1,
	}
	if size == stateSize {
		s.format = int(b[28])
	}
	if s.logEnd < 0 || s.format < 1 {
		return appliedState{}, fmt.Errorf("cluster: applied state: log end %d, format %d", s.logEnd, s.format)
	}
	return s, nil
}

// readState reads path; a missing file is the state of a new replica.
func readState(fs vfs.FS, path string) (appliedState, error) {
	b, err := vfs.ReadFile(fs, path)
	if vfs.IsNotExist(err) {
		return appliedState{format: 1}, nil
	}
	if err != nil {
		return appliedState{}, fmt.Errorf("cluster: applied state: %w", err)
	}
	return decodeState(b)
}
