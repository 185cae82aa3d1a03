package sqlfilter

import (
	"math"
	"strings"
	"sync"
	"testing"
)

// props is a map-backed Properties.
type props map[string]string

func (p props) Get(k string) (string, bool) {
	v, ok := p[k]
	return v, ok
}

// base is the property set of the examples in the brief.
var base = props{"a": "10", "b": "abc", "TAGS": "TagA"}

// result evaluates e against p and names the outcome: TRUE, FALSE, NULL or
// ERROR.
func result(e *Expr, p Properties) string {
	v, ok := e.root.eval(p)
	switch {
	case !ok:
		return "ERROR"
	case v.k == vNull:
		return "NULL"
	case v.k == vBool && v.b:
		return "TRUE"
	case v.k == vBool:
		return "FALSE"
	}
	return "NON-BOOLEAN"
}

type evalCase struct {
	src   string
	props props // base when nil
	want  string
}

func runEval(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, c := range cases {
		p := c.props
		if p == nil {
			p = base
		}
		e, err := Compile(c.src)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.src, err)
			continue
		}
		if got := result(e, p); got != c.want {
			t.Errorf("%q with %v = %s, want %s", c.src, p, got, c.want)
		}
		if got, want := e.Match(p), c.want == "TRUE"; got != want {
			t.Errorf("%q with %v: Match = %v, want %v", c.src, p, got, want)
		}
		if e.String() != c.src {
			t.Errorf("String() = %q, want %q", e.String(), c.src)
		}
	}
}

// TestBriefExamples are the examples the package must satisfy.
func TestBriefExamples(t *testing.T) {
	runEval(t, []evalCase{
		{src: "a > 5", want: "TRUE"},
		{src: "a > 5.5", want: "TRUE"},
		{src: "a BETWEEN 1 AND 10", want: "TRUE"},
		{src: "a NOT BETWEEN 1 AND 10", want: "FALSE"},
		{src: "a = 10", want: "TRUE"},
		{src: "a = '10'", want: "TRUE"},
		{src: "a = 10.0", want: "TRUE"},
		{src: "b > 5", want: "ERROR"},
		{src: "b = 'abc'", want: "TRUE"},
		{src: "b <> 'abc'", want: "FALSE"},
		{src: "c = 'x'", want: "NULL"},
		{src: "c <> 'x'", want: "NULL"},
		{src: "c IS NULL", want: "TRUE"},
		{src: "a IS NOT NULL", want: "TRUE"},
		{src: "TAGS IN ('TagA','TagB')", want: "TRUE"},
		{src: "TAGS NOT IN ('TagA')", want: "FALSE"},
		{src: "c IN ('x')", want: "NULL"},
		{src: "b CONTAINS 'bc'", want: "TRUE"},
		{src: "b NOT CONTAINS 'zz'", want: "TRUE"},
		{src: "c NOT CONTAINS 'zz'", want: "FALSE"},
		{src: "b STARTSWITH ''", want: "FALSE"},
		{src: "(a > 5 AND b = 'abc') OR c = 'x'", want: "TRUE"},
		{src: "c = 'x' OR a > 5", want: "TRUE"},
		{src: "c = 'x' AND a > 5", want: "NULL"},
		{src: "NOT (c = 'x')", want: "NULL"},
		{src: "a > -5", want: "TRUE"},
		{src: "-a < 0", want: "NULL"},
		{src: "a > 2147483648", want: "FALSE"},
		{src: "TRUE", want: "TRUE"},
		{src: "FALSE", want: "FALSE"},
		{src: "a", want: "FALSE"},
		{src: "c", want: "NULL"},
		{src: "a >= 10 and B = 'x'", want: "NULL"},
	})
}

func TestOperators(t *testing.T) {
	runEval(t, []evalCase{
		// = and <>, including NULL handling.
		{src: "a = 11", want: "FALSE"},
		{src: "a <> 11", want: "TRUE"},
		{src: "a <> 10", want: "FALSE"},
		{src: "b = 'ABC'", want: "FALSE"},
		{src: "'x' = c", want: "FALSE"}, // NULL on the right only: FALSE
		{src: "c = d", want: "TRUE"},    // both NULL
		{src: "c <> d", want: "FALSE"},
		{src: "c = b", want: "NULL"}, // NULL on the left only: NULL
		{src: "b = c", want: "FALSE"},
		{src: "b <> c", want: "TRUE"},
		// Ordering operators.
		{src: "a > 10", want: "FALSE"},
		{src: "a >= 10", want: "TRUE"},
		{src: "a < 10", want: "FALSE"},
		{src: "a <= 10", want: "TRUE"},
		{src: "a < 11", want: "TRUE"},
		{src: "5 < a", want: "TRUE"},
		{src: "c > 5", want: "NULL"},
		{src: "5 > c", want: "NULL"},
		{src: "c < 5 OR TRUE", want: "TRUE"},
		{src: "5.5 > 5", want: "TRUE"},
		{src: "2147483648 > 5", want: "TRUE"},
		{src: "5 < 5.5", want: "TRUE"},
		// IS [NOT] NULL on anything.
		{src: "a IS NULL", want: "FALSE"},
		{src: "c IS NOT NULL", want: "FALSE"},
		{src: "5 IS NULL", want: "FALSE"},
		{src: "NULL IS NULL", want: "TRUE"},
		{src: "(c = 'x') IS NULL", want: "TRUE"},
		{src: "(a = 10) IS NOT NULL", want: "TRUE"},
		{src: "-b IS NULL", want: "TRUE"},
		{src: "a IS NULL IS NULL", want: "FALSE"},
		// IN.
		{src: "TAGS IN ('TagB')", want: "FALSE"},
		{src: "TAGS IN ('taga')", want: "FALSE"},
		{src: "TAGS NOT IN ('TagB','TagC')", want: "TRUE"},
		{src: "c NOT IN ('x')", want: "NULL"},
		{src: "(TAGS) IN ('TagA')", want: "TRUE"},
		{src: "TAGS IN ('1','2','3','4','5','6','7','8','TagA')", want: "TRUE"},
		{src: "TAGS IN ('1','2','3','4','5','6','7','8','9')", want: "FALSE"},
		{src: "TAGS NOT IN ('1','2','3','4','5','6','7','8','TagA')", want: "FALSE"},
		{src: "TAGS NOT IN ('1','2','3','4','5','6','7','8','9')", want: "TRUE"},
		{src: "q IN ('it''s')", props: props{"q": "it's"}, want: "TRUE"},
		// CONTAINS, STARTSWITH, ENDSWITH.
		{src: "b CONTAINS 'x'", want: "FALSE"},
		{src: "b NOT CONTAINS 'b'", want: "FALSE"},
		{src: "b STARTSWITH 'ab'", want: "TRUE"},
		{src: "b STARTSWITH 'bc'", want: "FALSE"},
		{src: "b NOT STARTSWITH 'bc'", want: "TRUE"},
		{src: "b ENDSWITH 'bc'", want: "TRUE"},
		{src: "b NOT ENDSWITH 'bc'", want: "FALSE"},
		{src: "b CONTAINS ''", want: "FALSE"},
		{src: "b NOT CONTAINS ''", want: "FALSE"},
		{src: "b NOT STARTSWITH ''", want: "FALSE"},
		{src: "b ENDSWITH ''", want: "FALSE"},
		{src: "b NOT ENDSWITH ''", want: "FALSE"},
		{src: "c CONTAINS 'x'", want: "FALSE"},
		{src: "c STARTSWITH 'x'", want: "FALSE"},
		{src: "c NOT STARTSWITH 'x'", want: "FALSE"},
		{src: "c ENDSWITH 'x'", want: "FALSE"},
		{src: "c NOT ENDSWITH 'x'", want: "FALSE"},
		{src: "5 CONTAINS '5'", want: "FALSE"}, // not a string
		{src: "5 NOT CONTAINS '5'", want: "FALSE"},
		{src: "(a > 1) CONTAINS 'T'", want: "FALSE"},
		{src: "'axb' CONTAINS 'x'", want: "TRUE"},
		{src: "'axb' NOT CONTAINS 'u'", want: "TRUE"},
		{src: "' ' CONTAINS ' '", want: "TRUE"},
		{src: "'s' CONTAINS '\\'", want: "FALSE"},
		{src: "(b > 5) CONTAINS ''", want: "FALSE"}, // empty search: operand not evaluated
		{src: "b CONTAINS 'b' AND b ENDSWITH 'c'", want: "TRUE"},
		// BETWEEN.
		{src: "a BETWEEN 10 AND 10", want: "TRUE"},
		{src: "a BETWEEN 11 AND 20", want: "FALSE"},
		{src: "a BETWEEN 1 AND 9", want: "FALSE"},
		{src: "a BETWEEN 1.5 AND 10", want: "TRUE"},
		{src: "a BETWEEN -5 AND -10", want: "FALSE"}, // negations are not literals: no order check
		{src: "a NOT BETWEEN 11 AND 20", want: "TRUE"},
		{src: "a NOT BETWEEN 3 AND 1", want: "TRUE"}, // RocketMQ checks the order for BETWEEN only
		{src: "c BETWEEN 1 AND 2", want: "NULL"},
		{src: "c NOT BETWEEN 1 AND 2", want: "NULL"},
		{src: "b BETWEEN 1 AND 2", want: "ERROR"},
		{src: "a BETWEEN 1 AND c", want: "NULL"},
		{src: "a BETWEEN 11 AND c", want: "FALSE"},
		{src: "a NOT BETWEEN c AND 5", want: "TRUE"},
		{src: "a NOT BETWEEN c AND 50", want: "NULL"},
		{src: "a BETWEEN 11 AND -(b > 5)", want: "FALSE"}, // high not evaluated
		{src: "a BETWEEN 1 AND -(b > 5)", want: "ERROR"},
		{src: "a BETWEEN 1 AND 10 AND b = 'abc'", want: "TRUE"},
		{src: "key IS NOT NULL AND key BETWEEN 0 AND 100", props: props{"key": "con"}, want: "ERROR"},
		// NOT.
		{src: "NOT (a > 5)", want: "FALSE"},
		{src: "NOT (a < 5)", want: "TRUE"},
		{src: "NOT NOT (a > 5)", want: "TRUE"},
		{src: "NOT a", want: "TRUE"}, // a present: boolean cast is FALSE
		{src: "NOT c", want: "NULL"},
		{src: "NOT TRUE", want: "FALSE"},
		{src: "NOT (b > 5)", want: "ERROR"},
		// AND/OR three-valued logic and short-circuits.
		{src: "TRUE AND TRUE", want: "TRUE"},
		{src: "TRUE AND FALSE", want: "FALSE"},
		{src: "c = 'x' AND TRUE", want: "NULL"},
		{src: "c = 'x' AND FALSE", want: "FALSE"},
		{src: "TRUE AND c = 'x'", want: "NULL"},
		{src: "FALSE AND c = 'x'", want: "FALSE"},
		{src: "c = 'x' AND c = 'y'", want: "NULL"},
		{src: "FALSE AND b > 5", want: "FALSE"}, // right not evaluated
		{src: "b > 5 AND FALSE", want: "ERROR"},
		{src: "TRUE AND b > 5", want: "ERROR"},
		{src: "FALSE OR FALSE", want: "FALSE"},
		{src: "FALSE OR TRUE", want: "TRUE"},
		{src: "c = 'x' OR TRUE", want: "TRUE"},
		{src: "c = 'x' OR FALSE", want: "NULL"},
		{src: "FALSE OR c = 'x'", want: "NULL"},
		{src: "TRUE OR b > 5", want: "TRUE"},
		{src: "b > 5 OR TRUE", want: "ERROR"},
		{src: "FALSE OR b > 5", want: "ERROR"},
		{src: "a AND TRUE", want: "FALSE"},
		{src: "c OR TRUE", want: "TRUE"},
		{src: "c OR c", want: "NULL"},
		{src: "a = 1 OR a = 2 AND a = 10", want: "FALSE"}, // AND binds tighter
		{src: "a = 10 OR a = 2 AND a = 3", want: "TRUE"},
		{src: "(a = 10 OR a = 2) AND a = 3", want: "FALSE"},
		// NULL literal: a boolean constant in RocketMQ.
		{src: "NULL", want: "NULL"},
		{src: "NOT NULL", want: "NULL"},
		{src: "NULL OR a > 5", want: "TRUE"},
		{src: "NULL AND a > 5", want: "NULL"},
		{src: "a = -NULL", want: "FALSE"},
		{src: "c = -NULL", want: "TRUE"},
		// Negation and unary plus.
		{src: "-(-5) = 5", want: "TRUE"},
		{src: "- -5 = 5", want: "TRUE"},
		{src: "+5 = 5", want: "TRUE"},
		{src: "+ + a = 10", want: "TRUE"},
		{src: "-5 < 0", want: "TRUE"},
		{src: "-5.5 < -5", want: "TRUE"},
		{src: "-(a > 5) IS NULL", want: "TRUE"},
		{src: "-TRUE IS NULL", want: "TRUE"},
		{src: "-'x' IS NULL", want: "TRUE"},
		{src: "c < -(b > 5) OR TRUE", want: "TRUE"}, // NULL left: right side not evaluated
		// Chained =: (a = b) = c.
		{src: "a = b = c", want: "FALSE"},
		{src: "c = b = b", want: "NULL"},
		{src: "a = b = b", want: "ERROR"}, // Boolean compared with a String
		{src: "b = (a = 10)", want: "FALSE"},
	})
}

func TestConversions(t *testing.T) {
	runEval(t, []evalCase{
		// Integer vs Long vs Double vs String.
		{src: "a = 10L", want: "TRUE"}, // 10L is an Integer: it fits in 32 bits
		{src: "a = 2147483648", props: props{"a": "2147483648"}, want: "TRUE"},
		{src: "a = 5", props: props{"a": "2147483648"}, want: "ERROR"}, // not an int32
		{src: "a > 5", props: props{"a": "2147483648"}, want: "ERROR"},
		{src: "a > 2147483647", props: props{"a": "2147483648"}, want: "ERROR"},
		{src: "a >= 2147483648", props: props{"a": "2147483648"}, want: "TRUE"},
		{src: "a > 5.0", props: props{"a": "2147483648"}, want: "TRUE"},
		{src: "a = -2147483648", props: props{"a": "-2147483648"}, want: "TRUE"},
		{src: "a > -2147483648", props: props{"a": "99999999999"}, want: "TRUE"},  // a Long
		{src: "a > -2147483647", props: props{"a": "99999999999"}, want: "ERROR"}, // an Integer
		{src: "a = 9223372036854775807", props: props{"a": "9223372036854775807"}, want: "TRUE"},
		{src: "a < 9223372036854775807", props: props{"a": "9223372036854775808"}, want: "ERROR"},
		{src: "2147483648 = 2147483648.0", want: "TRUE"},
		{src: "5 = 5.0", want: "TRUE"},
		{src: "'5' = 5", want: "TRUE"},
		{src: "'5' = 5.0", want: "TRUE"},
		{src: "'x' = 5", want: "ERROR"},
		{src: "'x' = 5.0", want: "ERROR"},
		{src: "'abc' = 'abc'", want: "TRUE"},
		{src: "a = 1.0e1", want: "TRUE"},
		{src: "a = 1E1", want: "TRUE"},
		{src: "a = 100e-1", want: "TRUE"},
		{src: "a = 10.", want: "TRUE"},
		{src: "a > .5", want: "TRUE"},
		{src: "a > 5.E-1", want: "TRUE"},
		{src: "a > 5e+0", want: "TRUE"},
		{src: "b = 10", want: "ERROR"},
		{src: "b <> 10", want: "ERROR"},
		// Java Integer.valueOf: sign, digits, nothing else.
		{src: "p = 5", props: props{"p": "+5"}, want: "TRUE"},
		{src: "p = -5", props: props{"p": "-5"}, want: "TRUE"},
		{src: "p = 7", props: props{"p": "007"}, want: "TRUE"},
		{src: "p = 5", props: props{"p": " 5"}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "5 "}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "5d"}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "5.0"}, want: "ERROR"},
		{src: "p = 5", props: props{"p": ""}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "+"}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "1_000"}, want: "ERROR"},
		{src: "p = 5", props: props{"p": "0x5"}, want: "ERROR"},
		// Java Double.valueOf: trimmed, suffixes, NaN, Infinity, hex.
		{src: "p = 5.0", props: props{"p": " 5 "}, want: "TRUE"},
		{src: "p = 7.0", props: props{"p": "\t7\n"}, want: "TRUE"},
		{src: "p = 5.0", props: props{"p": "5d"}, want: "TRUE"},
		{src: "p = 5.0", props: props{"p": "5F"}, want: "TRUE"},
		{src: "p = 5.0", props: props{"p": "5."}, want: "TRUE"},
		{src: "p = 0.5", props: props{"p": ".5"}, want: "TRUE"},
		{src: "p = 1.5", props: props{"p": "+1.5"}, want: "TRUE"},
		{src: "p = 1000.0", props: props{"p": "1e3"}, want: "TRUE"},
		{src: "p = 16.0", props: props{"p": "0x10p0"}, want: "TRUE"},
		{src: "p = 3.0", props: props{"p": "0x1.8p1d"}, want: "TRUE"},
		{src: "p = 16.0", props: props{"p": "0x10"}, want: "ERROR"},
		{src: "p = 5.0", props: props{"p": "5dd"}, want: "ERROR"},
		{src: "p = 1.5", props: props{"p": "1.5e"}, want: "ERROR"},
		{src: "p = 1.5", props: props{"p": ""}, want: "ERROR"},
		{src: "p = 1.5", props: props{"p": "."}, want: "ERROR"},
		{src: "p = 1.5", props: props{"p": "1_000"}, want: "ERROR"},
		{src: "p > 1.5", props: props{"p": "inf"}, want: "ERROR"},
		{src: "p > 1.5", props: props{"p": "infinity"}, want: "ERROR"},
		{src: "p > 1.5", props: props{"p": "NaNd"}, want: "ERROR"},
		{src: "p > 1.5", props: props{"p": "nan"}, want: "ERROR"},
		{src: "p = 5.0", props: props{"p": "NaN"}, want: "FALSE"},
		{src: "p > 5.0", props: props{"p": "NaN"}, want: "TRUE"}, // Double.compare: NaN is greatest
		{src: "p > 1E308", props: props{"p": "Infinity"}, want: "TRUE"},
		{src: "p < -1E308", props: props{"p": "-Infinity"}, want: "TRUE"},
		{src: "p > 1E308", props: props{"p": "1e400"}, want: "TRUE"}, // overflows to Infinity, as in Java
		{src: "p > 1E308", props: props{"p": "+Infinity"}, want: "TRUE"},
		{src: "p > 5", props: props{"p": "NaN"}, want: "ERROR"}, // Integer.valueOf("NaN")
		// Two strings with an ordering operator: both parsed as doubles.
		{src: "x > y", props: props{"x": "10", "y": "9"}, want: "TRUE"},
		{src: "x < y", props: props{"x": "10", "y": "9"}, want: "FALSE"},
		{src: "x > y", props: props{"x": "20", "y": "1e1"}, want: "TRUE"},
		{src: "x >= y", props: props{"x": " 3.14 ", "y": "3.14d"}, want: "TRUE"},
		{src: "x > y", props: props{"x": "abc", "y": "1"}, want: "ERROR"},
		{src: "x > y", props: props{"x": "1", "y": "abc"}, want: "ERROR"},
		{src: "x < y", props: props{"x": "-0.0", "y": "0"}, want: "TRUE"},   // Double.compare: -0.0 < 0.0
		{src: "x = y", props: props{"x": "10", "y": "10.0"}, want: "FALSE"}, // = on strings is textual
		{src: "x = y", props: props{"x": "3.14", "y": "3.14"}, want: "TRUE"},
		{src: "x <> y", props: props{"x": "3.14", "y": "3.141"}, want: "TRUE"},
		{src: "a BETWEEN up AND low", props: props{"a": "3.14", "up": "up", "low": "low"}, want: "ERROR"},
		// String vs Boolean: Boolean.valueOf on the string side.
		{src: "t = TRUE", props: props{"t": "true"}, want: "TRUE"},
		{src: "t = TRUE", props: props{"t": "TRUE"}, want: "TRUE"},
		{src: "t = TRUE", props: props{"t": "yes"}, want: "FALSE"},
		{src: "t = FALSE", props: props{"t": "yes"}, want: "TRUE"},
		{src: "t <> TRUE", props: props{"t": "tRuE"}, want: "FALSE"},
		{src: "a=TRUE OR b=FALSE", props: props{"a": "true", "b": "false"}, want: "TRUE"},
		{src: "a=TRUE OR b=FALSE", props: props{"a": "false", "b": "true"}, want: "FALSE"},
		{src: "'true' = TRUE", want: "TRUE"},
		{src: "TRUE = t", props: props{"t": "true"}, want: "ERROR"}, // Java: ClassCastException
		{src: "TRUE = c", want: "FALSE"},
		{src: "TRUE = TRUE", want: "TRUE"},
		{src: "FALSE = TRUE", want: "FALSE"},
		{src: "(a > 5) = TRUE", want: "TRUE"},
		{src: "(a > 5) <> FALSE", want: "TRUE"},
		// Boolean vs number: Java's __compare answers -1 ("less than").
		{src: "(a > 5) = 1", want: "FALSE"},
		{src: "(a > 5) <> 1", want: "TRUE"},
		{src: "1 = (a > 5)", want: "FALSE"},
		{src: "1.5 = (a > 5)", want: "FALSE"},
		// String literals with quotes.
		{src: "q = 'it''s'", props: props{"q": "it's"}, want: "TRUE"},
		{src: "TAGS is not null and TAGS='''''tag'''''", props: props{"TAGS": "''tag''"}, want: "TRUE"},
		{src: "q = ''''", props: props{"q": "'"}, want: "TRUE"},
		{src: "q = ''", props: props{"q": ""}, want: "TRUE"},
		{src: "q = 'héllo -- /* x */'", props: props{"q": "héllo -- /* x */"}, want: "TRUE"},
	})
}

func TestLexing(t *testing.T) {
	runEval(t, []evalCase{
		// Comments and whitespace.
		{src: "a > 5 -- comment\n", want: "TRUE"},
		{src: "a > 5 -- comment\r", want: "TRUE"},
		{src: "a > 5 -- comment\r\n", want: "TRUE"},
		{src: "-- leading\na > 5", want: "TRUE"},
		{src: "a > 5 --\n AND b = 'abc'", want: "TRUE"},
		{src: "a > 5 -- AND b = 'x'\n", want: "TRUE"},
		{src: "/* c */ a > 5 /* d */", want: "TRUE"},
		{src: "a /* x */ > -- y\r\n 5", want: "TRUE"},
		{src: "/**/a>5", want: "TRUE"},
		{src: "/* a ** b * / */ a > 5 /***/", want: "TRUE"},
		{src: "a/**/>/**/5", want: "TRUE"},
		{src: "\ta\n>\f5\r", want: "TRUE"},
		// "--" without a newline after it is two minus signs.
		{src: "a = --10", want: "TRUE"},
		{src: "a>--5", want: "TRUE"},
		// Case-insensitive keywords.
		{src: "a between 1 and 10", want: "TRUE"},
		{src: "a Not Between 1 And 10", want: "FALSE"},
		{src: "TAGS iN ('TagA')", want: "TRUE"},
		{src: "TAGS not in ('TagA')", want: "FALSE"},
		{src: "c is Null", want: "TRUE"},
		{src: "a IS nOt NULL", want: "TRUE"},
		{src: "true", want: "TRUE"},
		{src: "False or tRUE", want: "TRUE"},
		{src: "b contains 'b'", want: "TRUE"},
		{src: "b StartsWith 'a' and b endswith 'c'", want: "TRUE"},
		{src: "not (a < 5)", want: "TRUE"},
		{src: "a > 5 AnD c iS nUlL", want: "TRUE"},
		// Identifiers: case-sensitive, with _ $ and digits; keywords are not
		// identifiers, but longer words are.
		{src: "B = 'abc'", want: "NULL"},
		{src: "b = 'abc'", want: "TRUE"},
		{src: "$x = '1' AND _y = '2' AND z9 = '3' AND a_$1 = '4'",
			props: props{"$x": "1", "_y": "2", "z9": "3", "a_$1": "4"}, want: "TRUE"},
		{src: "NOTE = 'n' AND ORDER = 'o' AND ISA = 'i' AND INX = 'x' AND nullable = 'y' AND TRUEx = 't'",
			props: props{"NOTE": "n", "ORDER": "o", "ISA": "i", "INX": "x", "nullable": "y", "TRUEx": "t"}, want: "TRUE"},
		// Number forms.
		{src: "a = 10l", want: "TRUE"},
		{src: "a = 10L", want: "TRUE"},
		{src: "a > 0", want: "TRUE"},
		{src: "a = 010.0", want: "TRUE"}, // float literals may have leading zeros
		{src: "a = 10.e0", want: "TRUE"},
		{src: "a = 1e1", want: "TRUE"},
		{src: "a > 4.9e-324", want: "TRUE"}, // Double.MIN_VALUE itself is accepted
		{src: "a > 3e-324", want: "TRUE"},   // rounds up to Double.MIN_VALUE
		{src: "a < 1.7976931348623157e308", want: "TRUE"},
	})
}

func TestCompileErrors(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("(", n) + "a=1" + strings.Repeat(")", n) }
	cases := []struct {
		src  string
		want string // substring of the error
	}{
		{"", "expected expression, found end of input"},
		{"   ", "expected expression"},
		{"-- only a comment\n", "expected expression"},
		{"a >", "offset 3: expected expression, found end of input"},
		{"a > 'x'", "offset 4: value 'x' cannot be compared with >"},
		{"'x' < a", "cannot be compared"},
		{"a = NULL", "NULL cannot be compared"},
		{"NULL = a", "offset 0: NULL cannot be compared"},
		{"a <> NULL", "NULL cannot be compared"},
		{"(NULL) = a", "NULL cannot be compared"},
		{"a > TRUE", "cannot be compared"},
		{"a > NULL", "cannot be compared"},
		{"FALSE <= a", "cannot be compared"},
		{"TRUE = 'x'", "TRUE cannot be compared with 'x'"},
		{"FALSE = 1", "cannot be compared"},
		{"'abc'", "will not result in a boolean value"},
		{"5", "will not result in a boolean value"},
		{"1.5", "boolean"},
		{"-a", "boolean"},
		{"(5)", "boolean"},
		{"5 OR a = 1", "boolean"},
		{"a = 1 OR 5", "boolean"},
		{"a = 1 AND 'x'", "boolean"},
		{"NOT 5", "boolean"},
		{"NOT -a", "boolean"},
		{"a IN ()", "expected string literal in IN list"},
		{"5 IN ('a')", "IN needs a property"},
		{"(a > 1) IN ('a')", "IN needs a property"},
		{"-a IN ('a')", "IN needs a property"},
		{"a IN ('x'", "expected ',' or ')'"},
		{"a IN ('x' 'y')", "expected ',' or ')'"},
		{"a IN ('x',)", "expected string literal"},
		{"a IN 'x'", "expected '(' after IN"},
		{"a IN (1)", "expected string literal"},
		{"a BETWEEN 3 AND 1", "illegal BETWEEN bounds"},
		{"a BETWEEN 3.5 AND 3", "illegal BETWEEN bounds"},
		{"a BETWEEN 2147483648 AND 5", "illegal BETWEEN bounds"},
		{"a BETWEEN 'a' AND 'b'", "cannot be compared"},
		{"a BETWEEN NULL AND 5", "cannot be compared"},
		{"a NOT BETWEEN 1 AND TRUE", "cannot be compared"},
		{"(a > 1) BETWEEN 1 AND 2", "cannot be compared"},
		{"a BETWEEN 1 OR 2", "expected AND in BETWEEN"},
		{"a and between 2 and 10", "expected expression"},
		{"a > 1 > 2", "cannot be compared"},
		{"NOT a > 5", "cannot be compared"}, // NOT binds tighter: (NOT a) > 5
		{"a > (b > 1)", "cannot be compared"},
		{"a < NOT b", "cannot be compared"},
		{"0.0 < a", "less than"},
		{".0 < a", "less than"},
		{"0e5 < a", "less than"},
		{"1e-400 < a", "less than"},
		{"2e-324 < a", "less than"},
		{"a > 1e400", "greater than"},
		{"a > 99999999999999999999", "out of range"},
		{"a = 9223372036854775808", "out of range"},
		{"a = -9223372036854775808", "out of range"}, // as in RocketMQ: the literal is parsed before negation
		{"a b", "unexpected \"b\" after a complete expression"},
		{"a = 1 b = 2", "after a complete expression"},
		{"a > 1)", "unexpected \")\""},
		{"(a > 1", "expected ')'"},
		{"a = 'unterminated", "offset 4: unterminated string literal"},
		{"a = 'x''", "unterminated string literal"},
		{"a = 'x''' AND b = 'y", "offset 18: unterminated string literal"},
		{"a # 1", "offset 2: unexpected character '#'"},
		{"a = 'x' ä", "unexpected character 'ä'"},
		{"a\v> 5", "unexpected character"},
		{"a != 5", "unexpected character '!'"},
		{"a == 5", "expected expression"},
		{"a = \"x\"", "unexpected character"},
		{"a = 007", "unexpected \"0\""},
		{"a = 0L", "unexpected \"L\""},
		{"a = 5.5L", "unexpected \"L\""},
		{"a > 5.5.5", "unexpected \".5\""},
		{"a > 0x10", "unexpected \"x10\""},
		{"a > 5E", "unexpected \"E\""},
		{"/* unterminated", "unterminated block comment"},
		{"a > 5 /* x *", "unterminated block comment"},
		{"a / 5", "unexpected character '/'"},
		{"a > 5 --", "unexpected \"-\""}, // no newline: two minus signs
		{"a > --5\n", "expected expression"},
		{"a NOT 5", "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT"},
		{"a NOT", "after NOT, found end of input"},
		{"a IS 5", "expected NULL or NOT NULL after IS"},
		{"a IS NOT", "expected NULL or NOT NULL"},
		{"a IS NOT NOT NULL", "expected NULL"},
		{"a CONTAINS 5", "expected string literal after CONTAINS"},
		{"a NOT STARTSWITH b", "expected string literal after STARTSWITH"},
		{"a ENDSWITH", "expected string literal"},
		{"a = b OR", "expected expression"},
		{"a > 5 AND", "expected expression"},
		{"+", "expected expression"},
		{"()", "expected expression, found \")\""},
		{"AND", "expected expression"},
		{",", "expected expression"},
		{deep(65), "nested more than 64 levels"},
		{strings.Repeat("NOT ", 65) + "a", "nested more than 64 levels"},
		{"a > " + strings.Repeat("- ", 65) + "5", "nested more than 64 levels"},
		{"a > " + strings.Repeat("-(", 33) + "5" + strings.Repeat(")", 33), "nested more than 64 levels"},
		{strings.Repeat("(", 10000), "longer than the maximum"},
		{"a = '" + strings.Repeat("x", MaxLength) + "'", "longer than the maximum of 4096"},
	}
	for _, c := range cases {
		e, err := Compile(c.src)
		if err == nil {
			t.Errorf("Compile(%.60q) succeeded, want an error containing %q", c.src, c.want)
			continue
		}
		if e != nil {
			t.Errorf("Compile(%.60q) returned an Expr along with an error", c.src)
		}
		if !strings.HasPrefix(err.Error(), "sqlfilter: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%.60q) error = %q, want it to contain %q", c.src, err, c.want)
		}
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("(", maxDepth) + "a=10" + strings.Repeat(")", maxDepth)
	nots := strings.Repeat("NOT ", maxDepth) + "(a = 10)" // the parentheses are one more level
	negs := "a < " + strings.Repeat("-", maxDepth-1) + " 5"
	for _, src := range []string{deep, strings.Repeat("NOT ", maxDepth) + "a", negs} {
		if _, err := Compile(src); err != nil {
			t.Errorf("Compile(%.40q...): %v", src, err)
		}
	}
	if _, err := Compile(nots); err == nil {
		t.Errorf("Compile(%.40q...) succeeded, want a nesting error", nots)
	}
	e, err := Compile(deep)
	if err != nil || !e.Match(base) {
		t.Errorf("deeply parenthesised expression: err %v, want a match", err)
	}

	// A long flat chain is not nesting: it compiles up to MaxLength and
	// evaluates.
	var sb strings.Builder
	sb.WriteString("a = 10")
	for sb.Len()+len(" AND a = 10") <= MaxLength {
		sb.WriteString(" AND a = 10")
	}
	e, err = Compile(sb.String())
	if err != nil || !e.Match(base) {
		t.Fatalf("long AND chain (%d bytes): err %v, want a match", sb.Len(), err)
	}
	eqs := "a" + strings.Repeat("=a", (MaxLength-1)/2)
	if e, err = Compile(eqs); err != nil {
		t.Fatalf("long = chain: %v", err)
	}
	e.Match(base) // ERROR or FALSE; must simply not blow up

	// Exactly MaxLength bytes is accepted.
	src := "a = '" + strings.Repeat("x", MaxLength-6) + "'"
	if len(src) != MaxLength {
		t.Fatalf("len = %d", len(src))
	}
	if _, err := Compile(src); err != nil {
		t.Errorf("Compile of %d bytes: %v", len(src), err)
	}
}

// TestNestedBetweenIsLinear: BETWEEN evaluates its operand once, so nesting
// it (through negation) does not make evaluation exponential.
func TestNestedBetweenIsLinear(t *testing.T) {
	src := "a"
	for i := 0; i < 31; i++ {
		src = "-(" + src + " BETWEEN 1 AND 2)"
	}
	src += " IS NULL"
	e, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Match(base) {
		t.Errorf("%q does not match", src)
	}
}

func TestMatchNilAndEmpty(t *testing.T) {
	e, err := Compile("c IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Match(nil) {
		t.Error("Match(nil) = false; a nil Properties has no properties")
	}
	if !e.Match(props{}) {
		t.Error("Match(empty) = false")
	}
	var nilExpr *Expr
	if nilExpr.Match(base) || nilExpr.String() != "" {
		t.Error("nil *Expr must not match and must print empty")
	}
}

func TestParseJavaInt(t *testing.T) {
	cases := []struct {
		s    string
		long bool
		want int64
		ok   bool
	}{
		{"0", false, 0, true},
		{"-0", false, 0, true},
		{"+5", false, 5, true},
		{"007", false, 7, true},
		{"2147483647", false, math.MaxInt32, true},
		{"-2147483648", false, math.MinInt32, true},
		{"2147483648", false, 0, false},
		{"-2147483649", false, 0, false},
		{"2147483648", true, 2147483648, true},
		{"9223372036854775807", true, math.MaxInt64, true},
		{"-9223372036854775808", true, math.MinInt64, true},
		{"9223372036854775808", true, 0, false},
		{"-9223372036854775809", true, 0, false},
		{"99999999999999999999999", true, 0, false},
		{"", false, 0, false},
		{"+", false, 0, false},
		{"-", false, 0, false},
		{"+-1", false, 0, false},
		{" 1", false, 0, false},
		{"1 ", false, 0, false},
		{"1.0", false, 0, false},
		{"1e3", false, 0, false},
		{"1_0", false, 0, false},
		{"١", false, 0, false}, // Java accepts Unicode digits; ASCII only here
	}
	for _, c := range cases {
		got, ok := parseJavaInt(c.s, c.long)
		if got != c.want || ok != c.ok {
			t.Errorf("parseJavaInt(%q, %v) = %d, %v; want %d, %v", c.s, c.long, got, ok, c.want, c.ok)
		}
	}
}

func TestParseJavaDouble(t *testing.T) {
	cases := []struct {
		s    string
		want float64
		ok   bool
	}{
		{"1", 1, true},
		{"1.5", 1.5, true},
		{"1.", 1, true},
		{".5", 0.5, true},
		{"1e3", 1000, true},
		{"1E+3", 1000, true},
		{"1.5e-1", 0.15, true},
		{"+1.5", 1.5, true},
		{"-1.5", -1.5, true},
		{" 5 ", 5, true},
		{"\x00\x1f5\x20", 5, true},
		{"5d", 5, true},
		{"5D", 5, true},
		{"5f", 5, true},
		{"5.e2F", 500, true},
		{"Infinity", math.Inf(1), true},
		{"+Infinity", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true},
		{"1e400", math.Inf(1), true},
		{"-1e400", math.Inf(-1), true},
		{"1e-400", 0, true},
		{"0x1p4", 16, true},
		{"0X1.8P1", 3, true},
		{"-0x.8p1d", -1, true},
		{"0x10", 0, false},
		{"0x", 0, false},
		{"0xp1", 0, false},
		{"0x1p", 0, false},
		{"", 0, false},
		{"   ", 0, false},
		{".", 0, false},
		{"e3", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{"+", 0, false},
		{"d", 0, false},
		{"+d", 0, false},
		{"++1", 0, false},
		{"1..5", 0, false},
		{"1 5", 0, false},
		{"5dd", 0, false},
		{"NaNd", 0, false},
		{"Infinityd", 0, false},
		{"inf", 0, false},
		{"+inf", 0, false},
		{"infinity", 0, false},
		{"INFINITY", 0, false},
		{"nan", 0, false},
		{"1_000", 0, false},
		{"\u00a05", 0, false}, // only chars <= ' ' are trimmed
	}
	for _, c := range cases {
		got, ok := parseJavaDouble(c.s)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseJavaDouble(%q) = %v, %v; want %v, %v", c.s, got, ok, c.want, c.ok)
		}
	}
	for _, s := range []string{"NaN", "+NaN", "-NaN", " NaN "} {
		if got, ok := parseJavaDouble(s); !ok || !math.IsNaN(got) {
			t.Errorf("parseJavaDouble(%q) = %v, %v; want NaN", s, got, ok)
		}
	}
}

func TestCompareDouble(t *testing.T) {
	nan := math.NaN()
	negZero := math.Copysign(0, -1)
	cases := []struct {
		a, b float64
		want int
	}{
		{1, 2, -1},
		{2, 1, 1},
		{1, 1, 0},
		{negZero, 0, -1},
		{0, negZero, 1},
		{nan, nan, 0},
		{nan, math.Inf(1), 1},
		{math.Inf(1), nan, -1},
		{nan, 0, 1},
	}
	for _, c := range cases {
		if got := compareDouble(c.a, c.b); got != c.want {
			t.Errorf("compareDouble(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestNegate checks that negation keeps Java's Integer/Long distinction.
func TestNegate(t *testing.T) {
	if v := negate(intValue(5)); v.i != -5 || v.long {
		t.Errorf("-Integer 5 = %+v", v)
	}
	if v := negate(intValue(2147483648)); v.i != -2147483648 || !v.long {
		t.Errorf("-Long 2147483648 = %+v, want the Long -2147483648", v)
	}
	if v := negate(value{k: vInt, i: math.MinInt32}); v.i != math.MinInt32 || v.long {
		t.Errorf("-Integer.MIN_VALUE = %+v, want Java's wrap-around", v)
	}
	if v := negate(value{k: vString, s: "5"}); v.k != vNull {
		t.Errorf("-'5' = %+v, want NULL", v)
	}
}

// TestConcurrentMatch shares one Expr between goroutines (run with -race).
func TestConcurrentMatch(t *testing.T) {
	e, err := Compile("a > 5 AND TAGS IN ('TagA','TagB') AND b NOT CONTAINS 'z' AND a BETWEEN 1 AND 20")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if !e.Match(base) {
					t.Error("no match")
					return
				}
				if e.Match(props{"a": "1"}) {
					t.Error("unexpected match")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestMatchDoesNotAllocate(t *testing.T) {
	e, err := Compile("a > 5 AND TAGS IN ('TagA','TagB')")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { e.Match(base) }); n != 0 {
		t.Errorf("Match allocates %v times per run", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	e, err := Compile("a > 5 AND TAGS IN ('TagA','TagB')")
	if err != nil {
		b.Fatal(err)
	}
	p := props{"a": "10", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "0A0B0C0D"}
	b.ReportAllocs()
	for b.Loop() {
		if !e.Match(p) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("a > 5 AND TAGS IN ('TagA','TagB')"); err != nil {
			b.Fatal(err)
		}
	}
}
