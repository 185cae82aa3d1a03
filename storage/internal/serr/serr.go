package serr

import "errors"

var (
	// ErrClosed: the store (or a component) is closed.
	ErrClosed = errors.New("storage: closed")
	// ErrNotWritable: the store cannot accept writes now (disk full, I/O
	// error, failed fsync). Nothing acknowledged before is damaged.
	ErrNotWritable = errors.New("storage: not writable")
	// ErrCorrupt: stored bytes failed validation (CRC, length, magic).
	ErrCorrupt = errors.New("storage: corrupt data")
	// ErrOffsetMoved: the requested offset is below the minimum still
	// stored (retention deleted it); ask again from the minimum.
	ErrOffsetMoved = errors.New("storage: offset moved")
	// ErrTooLarge: a message or record is larger than the configured limit.
	ErrTooLarge = errors.New("storage: too large")
	// ErrNotFound: no such record, queue or entry.
	ErrNotFound = errors.New("storage: not found")
	// ErrInvalid: an argument is malformed.
	ErrInvalid = errors.New("storage: invalid argument")
	// ErrLocked: the data directory is in use by another process.
	ErrLocked = errors.New("storage: data directory locked")
	// ErrDiskFull: the file system holding the store has less free
	// space than the disk reserve, which is kept for the writes that
	// let consumers drain the store; new messages are refused.
	ErrDiskFull = errors.New("storage: disk full")
	// ErrFormat: the data was written in a newer format than this build
	// supports (an older binary on a newer data directory).
	ErrFormat = errors.New("storage: unsupported format version")
)
