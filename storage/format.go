package storage

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

// FormatVersion is the data-directory layout this build writes, and the
// newest it opens. A directory records its version in the FORMAT file;
// one without that file predates it and is version 1.
const FormatVersion = 1

// ErrFormat: the data directory (or a file in it) was written by a newer
// mqgate in a format this build does not read.
var ErrFormat = serr.ErrFormat

const (
	formatFile   = "FORMAT"
	formatPrefix = "mqgate-data-format "
)

// readFormat returns the directory's format version, and present=false
// (version 1) if it has no FORMAT file.
func readFormat(fs vfs.FS, dir string) (version int, present bool, err error) {
	p := filepath.Join(dir, formatFile)
	b, err := vfs.ReadFile(fs, p)
	if vfs.IsNotExist(err) {
		return 1, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("storage: %s: %w", p, err)
	}
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), formatPrefix)
	v, perr := strconv.Atoi(s)
	if !ok || perr != nil || v < 1 {
		return 0, true, fmt.Errorf("%w: %s: %q is not %q followed by a version number", serr.ErrCorrupt, p, b, formatPrefix)
	}
	return v, true, nil
}

// checkFormat refuses a directory of a newer format than FormatVersion.
func checkFormat(fs vfs.FS, dir string) (present bool, err error) {
	v, present, err := readFormat(fs, dir)
	if err != nil {
		return present, err
	}
	if v > FormatVersion {
		return present, fmt.Errorf("%w: data directory %s has format version %d; this mqgate supports up to %d",
			serr.ErrFormat, dir, v, FormatVersion)
	}
	return present, nil
}

// ensureFormat checks the directory's format and records it if the
// directory has no FORMAT file yet (new, or of the layout before the
// file existed, which is version 1).
func ensureFormat(fs vfs.FS, dir string) error {
	present, err := checkFormat(fs, dir)
	if err != nil || present {
		return err
	}
	data := []byte(formatPrefix + strconv.Itoa(FormatVersion) + "\n")
	if err := vfs.WriteFileAtomic(fs, filepath.Join(dir, formatFile), data); err != nil {
		return fmt.Errorf("storage: write %s: %w", formatFile, err)
	}
	return nil
}
