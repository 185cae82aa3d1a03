package e2eutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a file system of size bytes (a tmpfs) on a new
// temporary directory and returns the directory, for tests that fill a
// data disk. It is unmounted at cleanup, after the processes the test
// started afterwards were stopped. Mounting needs root (CI runs as root):
// elsewhere the test is skipped, saying so.
func SmallDisk(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to mount a %d MiB file system to fill (CI runs as root)", size>>20)
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("cannot mount a %d MiB tmpfs on %s to fill (%v): run as root with the right to mount (CI does)", size>>20, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Something still holds it: detach it, it goes once released.
			if err2 := syscall.Unmount(dir, syscall.MNT_DETACH); err2 != nil {
				t.Errorf("unmount %s: %v; %v", dir, err, err2)
			}
		}
	})
	return dir
}

// FillFile writes n bytes to path (taking that much of its file system).
func FillFile(t testing.TB, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}
