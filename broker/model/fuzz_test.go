package model

import (
	"strings"
	"testing"
)

// FuzzParseTagFilter: ParseTagFilter never panics; it fails only on a
// control character; an accepted filter is a tag set (never SQL) whose
// tags are non-empty, trimmed, not "*", free of "||" and control
// characters, taken from the expression, matched by the filter, and each
// parses on its own to exactly itself.
func FuzzParseTagFilter(f *testing.F) {
	for _, s := range []string{"*", "", "A", "A || B||C", " a ||  || b ", "a||*", "||", "a|||b", "x\ty", "a||\u0085", "日本||\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := ParseTagFilter(expr)
		if err != nil {
			if !strings.ContainsFunc(expr, isControl) {
				t.Fatalf("%q refused without a control character: %v", expr, err)
			}
			return
		}
		if flt.SQL != nil || flt.All() != (len(flt.Tags) == 0) {
			t.Fatalf("%q: bad filter %+v", expr, flt)
		}
		for tag := range flt.Tags {
			if tag == "" || tag == "*" || tag != strings.TrimSpace(tag) || strings.Contains(tag, "||") ||
				strings.ContainsFunc(tag, isControl) || !strings.Contains(expr, tag) || !flt.Match(tag, nil) {
				t.Fatalf("%q: bad tag %q", expr, tag)
			}
			if one, err := ParseTagFilter(tag); err != nil || len(one.Tags) != 1 || !one.Match(tag, nil) {
				t.Fatalf("%q: tag %q parses alone to %v %v", expr, tag, one.Tags, err)
			}
		}
	})
}
