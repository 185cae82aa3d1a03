package storage

import (
	"fmt"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
)

// ReadMessageAt reads and verifies the record that starts at physOffset
// when the caller knows only the position (the classic remoting protocol
// hands commit-log offsets back: send-back, view by id, transactions).
// A position that is not the start of a record fails with ErrCorrupt or
// ErrNotFound, never with another record's content: the record's own
// position, magic and CRC are checked by ReadMessage.
func (s *Store) ReadMessageAt(physOffset int64) (*message.Message, error) {
	if physOffset < 0 {
		return nil, fmt.Errorf("%w: negative log position %d", serr.ErrInvalid, physOffset)
	}
	if physOffset < s.log.Min() {
		return nil, fmt.Errorf("%w: log position %d below log start %d", serr.ErrOffsetMoved, physOffset, s.log.Min())
	}
	written, err := s.log.WrittenFor(physOffset + int64(message.MinSize))
	if err != nil {
		return nil, err
	}
	if physOffset+int64(message.MinSize) > written {
		return nil, fmt.Errorf("%w: log position %d beyond written log %d", serr.ErrNotFound, physOffset, written)
	}
	var hdr [8]byte
	n, err := s.log.ReadRange(physOffset, hdr[:], written)
	if err != nil {
		return nil, err
	}
	size, err := message.PeekSize(hdr[:n], s.opts.MaxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("%w: no record starts at %d: %w", serr.ErrNotFound, physOffset, err)
	}
	return s.ReadMessage(physOffset, int32(size))
}
