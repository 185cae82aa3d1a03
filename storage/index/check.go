package index

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/storage/vfs"
)

// Problem is a damaged index file, as Check reports it.
type Problem struct {
	File   string
	Reason string
}

// Check reads the header of every index file in dir without changing
// anything and reports the files Open would drop (and re-index from the
// log) other than for being past the log: a header that fails its CRC or
// does not match the file's name or size, a file a lookup marked
// damaged, an unsealed file before the last one. Each such file and
// every later one are rebuilt by Open.
func Check(fs vfs.FS, dir string) ([]Problem, error) {
	names, err := fs.List(dir)
	if err != nil {
		if vfs.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	marked := map[string]bool{}
	for _, n := range names {
		if f, ok := strings.CutSuffix(n, damagedSuffix); ok {
			marked[f] = true
		}
	}
	var out []Problem
	var prevUnsealed string
	for _, n := range names {
		if !strings.HasSuffix(n, ".idx") {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(n, ".idx"), 10, 64)
		if err != nil {
			continue
		}
		p := filepath.Join(dir, n)
		if prevUnsealed != "" {
			out = append(out, Problem{File: prevUnsealed, Reason: "unsealed file before the last one"})
			prevUnsealed = ""
		}
		h, reason := checkFile(fs, p, base)
		if reason == "" && marked[n] {
			reason = "marked damaged by a lookup (a hash chain does not descend)"
		}
		if reason != "" {
			out = append(out, Problem{File: p, Reason: reason})
			continue
		}
		if !h.sealed {
			prevUnsealed = p
		}
	}
	return out, nil
}

func checkFile(fs vfs.FS, p string, base int64) (header, string) {
	f, err := fs.Open(p)
	if err != nil {
		return header{}, err.Error()
	}
	defer f.Close()
	var hb [headerSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return header{}, fmt.Sprintf("header unreadable: %v", err)
	}
	h, err := decodeHeader(hb[:])
	if err != nil {
		return h, err.Error()
	}
	if h.first != base {
		return h, fmt.Sprintf("header says first log position %d, the name %d", h.first, base)
	}
	sz, err := f.Size()
	if err != nil {
		return h, err.Error()
	}
	if need := headerSize + int64(h.slots)*4 + int64(h.count)*entrySize; sz < need {
		return h, fmt.Sprintf("file of %d bytes, its header needs %d", sz, need)
	}
	return h, ""
}
