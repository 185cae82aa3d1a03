package commitlog

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// BenchmarkLogAppend16: the commit log alone (no queues, no index), 16
// appenders of 1 KiB records, async flush, written with pwrite or staged
// in a ring (in /dev/shm when it is a tmpfs, as the store does).
func BenchmarkLogAppend16(b *testing.B) {
	b.Run("pwrite", func(b *testing.B) { benchLogAppend16(b, "") })
	stage := b.TempDir()
	if vfs.IsTmpfs("/dev/shm") {
		stage = "/dev/shm"
	}
	b.Run("staged", func(b *testing.B) { benchLogAppend16(b, stage) })
}

func benchLogAppend16(b *testing.B, stage string) {
	l, _, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), SegmentSize: 1 << 30, MaxRecordSize: 1 << 20, StagingDir: stage}, Recovery{From: -1, CleanEnd: -1})
	if err != nil {
		b.Fatal(err)
	}
	l.Start()
	m := &message.Message{Topic: "T", Body: make([]byte, 1024)}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(1100)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for next.Add(1) <= int64(b.N) {
				d, crc, _ := message.Encode(buf[:0], m)
				buf = d
				if _, _, err := l.Append(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	l.Stop(false)
	l.Close()
}
