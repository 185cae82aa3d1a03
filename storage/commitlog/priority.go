package commitlog

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// A sync-mode append is answered once the fsync that covers it returns
// and the syncer has woken it. On a machine whose cores are all busy (the
// gRPC handlers, the clients beside them) the syncer's thread waits its
// turn for a core after each fdatasync like any other thread, and that
// wait came to two or three times the fdatasync itself: every durable
// append in the round waits with it. A thread of its own with a higher
// scheduling priority (Options.SyncerNice) is picked as soon as its
// fdatasync completes.

// raiseSyncerPriority locks the calling goroutine to its OS thread and
// sets that thread's nice value; the function it returns puts the old
// value back (the goroutine ends locked, so its thread goes away with it,
// but the main thread is parked instead). Lowering the nice value below
// the process's needs CAP_SYS_NICE (or RLIMIT_NICE); without it the
// thread stays locked and keeps its priority, and the error says so.
func raiseSyncerPriority(nice int) (restore func(), err error) {
	runtime.LockOSThread()
	tid := unix.Gettid()
	// getpriority(2) returns 20 - nice for a thread.
	old, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return func() {}, err
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
		return func() {}, err
	}
	return func() { _ = unix.Setpriority(unix.PRIO_PROCESS, tid, 20-old) }, nil
}
