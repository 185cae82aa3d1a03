package commitlog

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// threadNices returns the nice value of each of the process's threads.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		// The fields after the command name, which is in parentheses:
		// state is field 3 and nice field 19.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		n, err := strconv.Atoi(f[19-3])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[tid] = n
	}
	return out
}

// atNice counts the process's threads at nice value n.
func atNice(t *testing.T, n int) int {
	c := 0
	for _, v := range threadNices(t) {
		if v == n {
			c++
		}
	}
	return c
}

// awaitAtNice waits until want threads run at nice value n.
func awaitAtNice(t *testing.T, n, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := atNice(t, n); got != want; got = atNice(t, n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d threads at nice %d, want %d", got, n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// In sync mode the syncer runs on a thread of its own with the nice value
// asked for (a higher one needs no privilege), appends stay durable, and
// the thread ends with the log.
func TestSyncerPriority(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	const nice = 7
	before := atNice(t, nice)
	o := syncOpts(vfs.NewMem(), 1<<20)
	o.SyncerNice = nice
	l, _ := openLog(t, o, Recovery{})
	l.Start()
	recs := appendN(t, l, 20, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, w := l.Durable(), l.Written(); d != w || len(recs) != 20 {
		t.Fatalf("durable %d, written %d", d, w)
	}
	awaitAtNice(t, nice, before+1)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	awaitAtNice(t, nice, before)
}
