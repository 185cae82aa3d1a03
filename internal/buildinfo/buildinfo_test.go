package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
		str      string
	}{
		{"no build info", nil, "", Info{Version: "dev", GoVersion: "go1.26.0"}, "dev (go1.26.0)"},
		{"devel build without VCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "dev",
			Info{Version: "dev", GoVersion: "go1.26.0"}, "dev (go1.26.0)"},
		{"tagged module version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}, Settings: vcs(rev, "false")}, "",
			Info{Version: "v0.3.0", Revision: rev, Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}, "v0.3.0 (0123456789ab, go1.26.0)"},
		{"untagged dirty work tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260102030405-0123456789ab+dirty"}, Settings: vcs(rev, "true")}, "dev",
			Info{Version: "v0.0.0-20260102030405-0123456789ab+dirty", Revision: rev, Time: "2026-01-02T03:04:05Z", Dirty: true, GoVersion: "go1.26.0"},
			"v0.0.0-20260102030405-0123456789ab+dirty (0123456789ab, modified, go1.26.0)"},
		{"linker override wins", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "v0.4.0-rc.1",
			Info{Version: "v0.4.0-rc.1", Revision: rev, Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}, "v0.4.0-rc.1 (0123456789ab, go1.26.0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := FromBuildInfo(c.bi, c.override)
			if c.bi == nil {
				got.GoVersion = "go1.26.0" // the running toolchain's
			}
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			if s := got.String(); s != c.str {
				t.Fatalf("String() = %q, want %q", s, c.str)
			}
		})
	}
}
