package sqlfilter

import (
	"strings"
	"testing"
)

// fuzzProps are the property sets every compiled fuzz input is evaluated
// against: none, the examples' set, and sets with numeric edge values.
var fuzzProps = []Properties{
	nil,
	props{},
	base,
	props{"a": "-1.5e3", "b": "true", "c": "NaN", "TAGS": "", "d": "2147483648"},
	props{"a": "2147483648", "b": " 5 ", "c": "-Infinity", "TAGS": "TagB", "x": "0x1p3", "y": "9223372036854775808"},
	props{"a": "-0.0", "b": "", "c": "+7", "KEYS": "k1 k2", "$x": "'", "_y": "\x00"},
}

var fuzzSeeds = []string{
	// Valid.
	"a > 5",
	"a > 5 AND TAGS IN ('TagA','TagB')",
	"(a > 5 AND b = 'abc') OR c = 'x'",
	"a BETWEEN 1 AND 10",
	"a NOT BETWEEN -1.5 AND 1e3",
	"TAGS NOT IN ('a','b','c','d','e','f','g','h','i')",
	"b CONTAINS 'bc' AND b NOT STARTSWITH 'x' OR b ENDSWITH ''",
	"c IS NULL OR a IS NOT NULL",
	"NOT (a <> 10)",
	"a = TRUE OR b = FALSE",
	"(a > 5) = TRUE",
	"a = b = c",
	"-a < 0 OR a = -2147483648 OR a = 2147483648L",
	"a > .5E+3 /* comment */ -- line\n AND b > c",
	"a = --10",
	"NULL",
	"a",
	"x > y",
	"$x = '''' AND _y IS NULL",
	"a = 'it''s'",
	// Invalid.
	"",
	"a >",
	"a > 'x'",
	"a = NULL",
	"'abc'",
	"5 IN ('a')",
	"a BETWEEN 3 AND 1",
	"a > 1 > 2",
	"0.0 < a",
	"a > 99999999999999999999",
	"a b",
	"a = 'unterminated",
	"a # 1",
	"a = 007",
	"/* open",
	"a IN ('x',",
	strings.Repeat("(", 70) + "a=1" + strings.Repeat(")", 70),
	strings.Repeat("NOT ", 70) + "a",
	"a > 1e400",
	"a = 'é' AND ü",
}

// FuzzCompile compiles arbitrary input and evaluates what compiles: neither
// may panic. It also checks cheap invariants: String returns the input, Match
// is deterministic, and appending a space changes neither whether the input
// compiles nor what it matches.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if len(src) > MaxLength && err == nil {
			t.Fatalf("Compile accepted %d bytes", len(src))
		}
		var e2 *Expr
		var err2 error
		if len(src) < MaxLength {
			e2, err2 = Compile(src + " ")
			if (err == nil) != (err2 == nil) {
				t.Fatalf("Compile(%q) error %v, but with a trailing space: %v", src, err, err2)
			}
		}
		if err != nil {
			if e != nil {
				t.Fatalf("Compile(%q) returned an Expr and an error", src)
			}
			if !strings.HasPrefix(err.Error(), "sqlfilter: ") {
				t.Fatalf("Compile(%q) error %q lacks the package prefix", src, err)
			}
			return
		}
		if e.String() != src {
			t.Fatalf("String() = %q, want %q", e.String(), src)
		}
		for _, p := range fuzzProps {
			m := e.Match(p)
			if m != e.Match(p) {
				t.Fatalf("%q: Match is not deterministic", src)
			}
			if e2 != nil && m != e2.Match(p) {
				t.Fatalf("%q: Match differs with a trailing space", src)
			}
		}
	})
}
