package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes a build.
type Info struct {
	// Version is the release ("v1.2.0"), the Go toolchain's version of an
	// untagged build ("v0.0.0-20260101120000-0123456789ab+dirty"), or
	// "dev" when neither the linker nor the toolchain named one.
	Version string
	// Revision is the VCS commit the binary was built from; "" when the
	// build had no VCS information (-buildvcs=false, a source archive).
	Revision string
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time string
	// Dirty reports that the work tree had changes the commit lacks.
	Dirty bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns this binary's build information. override, when not
// empty or "dev", is the version given at link time and wins over the
// module version.
func Read(override string) Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi, override)
}

// FromBuildInfo derives Info from bi (nil when the binary has none).
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	i := Info{Version: "dev", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Dirty = s.Value == "true"
			}
		}
	}
	if override != "" && override != "dev" {
		i.Version = override
	}
	return i
}

// ShortRevision is the first 12 characters of the revision.
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is the one-line form `mqgate version` prints after "mqgate ":
// "v1.2.0 (0123456789ab, go1.26.0)", "dev (0123456789ab, modified,
// go1.26.0)", "dev (go1.26.0)".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (")
	if r := i.ShortRevision(); r != "" {
		b.WriteString(r)
		b.WriteString(", ")
	}
	if i.Dirty {
		b.WriteString("modified, ")
	}
	b.WriteString(i.GoVersion)
	b.WriteString(")")
	return b.String()
}
