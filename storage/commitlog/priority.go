package commitlog

import (
	"runtime"
	"time"

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
// sets that thread's nice value. The function it returns puts the old
// value back; call it before the goroutine ends: a goroutine that ends
// locked takes its thread with it, except the main thread, which Go parks
// instead and which must not keep the raised priority. Lowering the nice
// value below the process's needs CAP_SYS_NICE (or RLIMIT_NICE); without
// it the goroutine is unlocked again, nothing changes, and the error says
// why.
func raiseSyncerPriority(nice int) (restore func(), err error) {
	runtime.LockOSThread()
	tid := unix.Gettid()
	// getpriority(2) returns 20 - nice for a thread.
	old, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err == nil {
		err = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	return func() { _ = unix.Setpriority(unix.PRIO_PROCESS, tid, 20-old) }, nil
}

// slowFsync splits sync-mode fsyncs into fast and slow by the last one.
// After a slow one a leader (runLead) raises its thread's priority and a
// durable append queues for the writer goroutine, whose batches give the
// next round more to cover; after a fast one (a disk with a power-safe
// cache, tmpfs) the round ends before a core is wanted, so the leader
// keeps its priority (raising and restoring it for every round cost more
// than it saved) and a durable append writes inline when it can, as async
// appends do.
const slowFsync = 100 * time.Microsecond
