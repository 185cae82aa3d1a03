package memlimit

import (
	"testing"
	"testing/fstest"
)

func TestCgroupLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		ok    bool
	}{
		{"v2 limited", fstest.MapFS{
			"proc/self/cgroup":                          {Data: []byte("0::/kubepods/pod1/c1\n")},
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": {Data: []byte("536870912\n")},
		}, 536870912, true},
		{"v2 in a cgroup namespace", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")},
		}, 1073741824, true},
		{"v2 unlimited", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("max\n")},
		}, 0, false},
		{"v1 limited", fstest.MapFS{
			"proc/self/cgroup": {Data: []byte("9:name=systemd:/\n4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n")},
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": {Data: []byte("268435456\n")},
		}, 268435456, true},
		{"v1 unlimited", fstest.MapFS{
			"proc/self/cgroup":                           {Data: []byte("4:memory:/\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")},
		}, 0, false},
		{"v1 path hidden by a namespace", fstest.MapFS{
			"proc/self/cgroup":                           {Data: []byte("4:memory:/docker/abc\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("268435456\n")},
		}, 268435456, true},
		{"garbage", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("lots\n")},
		}, 0, false},
		{"no cgroup file", fstest.MapFS{}, 0, false},
		{"a path that climbs out", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/../../etc\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("4096\n")},
		}, 4096, true},
	} {
		got, ok := CgroupLimit(c.files)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestDefault(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("1000000000\n")},
	}
	if n, why := Default(func(string) string { return "" }, fsys); n != 800000000 || why == "" {
		t.Fatalf("without GOMEMLIMIT: %d (%s), want 80%% of the limit", n, why)
	}
	if n, _ := Default(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	}, fsys); n != 0 {
		t.Fatalf("with GOMEMLIMIT set: %d, want nothing set", n)
	}
	if n, _ := Default(func(string) string { return "" }, fstest.MapFS{}); n != 0 {
		t.Fatalf("without a cgroup limit: %d", n)
	}
}

// FuzzCgroupFiles: whatever the cgroup files hold, a limit is either
// none or positive.
func FuzzCgroupFiles(f *testing.F) {
	f.Add([]byte("0::/a/b\n"), []byte("536870912\n"))
	f.Add([]byte("4:memory:/x\n"), []byte("max"))
	f.Add([]byte("::::\n0::\n"), []byte("-5"))
	f.Fuzz(func(t *testing.T, self, limit []byte) {
		v2, v1 := cgroupPaths(self)
		fsys := fstest.MapFS{"proc/self/cgroup": {Data: self}}
		for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
			fsys[p] = &fstest.MapFile{Data: limit}
		}
		_, _ = v2, v1
		if n, ok := CgroupLimit(fsys); ok && n <= 0 || !ok && n != 0 {
			t.Fatalf("limit %d, ok %v", n, ok)
		}
	})
}
