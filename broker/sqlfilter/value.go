package sqlfilter

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// vkind is the run-time type of a value, mirroring the Java classes a
// RocketMQ expression evaluates to: null, Boolean, Integer/Long, Double and
// String.
type vkind uint8

const (
	vNull vkind = iota
	vBool
	vInt   // Java Integer or Long; see value.long
	vFloat // Java Double
	vString
)

// value is one run-time value. Integers are kept as int64 with a flag
// telling Java's Integer (long == false) from Long (long == true): the two
// compare alike, but a string compared with an Integer must parse as a 32-bit
// int while one compared with a Long may use the full 64-bit range.
type value struct {
	k    vkind
	long bool
	b    bool
	i    int64
	f    float64
	s    string
}

var (
	null       = value{}
	trueValue  = value{k: vBool, b: true}
	falseValue = value{k: vBool}
)

func boolValue(b bool) value {
	if b {
		return trueValue
	}
	return falseValue
}

// intValue returns the value of an integer literal: Integer when it fits in
// 32 bits, Long otherwise (ConstantExpression.createFromDecimal).
func intValue(i int64) value {
	return value{k: vInt, i: i, long: i < math.MinInt32 || i > math.MaxInt32}
}

// negate is UnaryExpression.createNegate: numbers are negated keeping their
// type (an Integer stays an Integer, with Java's wrap-around; a Long stays a
// Long, so -2147483648 is the Long -2147483648), anything else is NULL.
func negate(v value) value {
	switch v.k {
	case vInt:
		if v.long {
			v.i = -v.i
		} else {
			v.i = int64(-int32(v.i))
		}
		return v
	case vFloat:
		v.f = -v.f
		return v
	}
	return null
}

// compare is ComparisonExpression.__compare with convertStringExpressions
// set (as RocketMQ always sets it): it returns <0, 0 or >0 for l against r,
// converting between types the way the Java code does. ok is false where
// Java throws (a string that does not parse as the number it is compared
// with, or a Boolean on the left of a String); the caller turns that into an
// evaluation error. Neither value may be NULL.
func compare(l, r value) (c int, ok bool) {
	if l.k == r.k {
		switch l.k {
		case vBool:
			return compareBool(l.b, r.b), true
		case vInt:
			// Integer vs Long: Java widens the Integer to a Long.
			return compareInt(l.i, r.i), true
		case vFloat:
			return compareDouble(l.f, r.f), true
		case vString:
			// Java compares UTF-16 code units; Go compares UTF-8 bytes, which
			// orders by code point. The two orders differ only between
			// supplementary characters and U+E000..U+FFFF. It does not matter
			// here: strings are only ever compared with each other by = and
			// <> (the ordering operators parse two strings as numbers first),
			// and equality is the same under both orders.
			return strings.Compare(l.s, r.s), true
		}
		return 0, true // two NULLs; not reached
	}
	switch l.k {
	case vBool:
		if r.k == vString {
			// Java casts the Boolean on the left to String here and throws a
			// ClassCastException.
			return 0, false
		}
	case vInt:
		switch r.k {
		case vFloat:
			return compareDouble(float64(l.i), r.f), true
		case vString:
			ri, ok := parseJavaInt(r.s, l.long)
			if !ok {
				return 0, false
			}
			return compareInt(l.i, ri), true
		}
	case vFloat:
		switch r.k {
		case vInt:
			return compareDouble(l.f, float64(r.i)), true
		case vString:
			rf, ok := parseJavaDouble(r.s)
			if !ok {
				return 0, false
			}
			return compareDouble(l.f, rf), true
		}
	case vString:
		switch r.k {
		case vBool:
			// Boolean.valueOf: true iff the string equals "true" ignoring case.
			return compareBool(strings.EqualFold(l.s, "true"), r.b), true
		case vInt:
			li, ok := parseJavaInt(l.s, r.long)
			if !ok {
				return 0, false
			}
			return compareInt(li, r.i), true
		case vFloat:
			lf, ok := parseJavaDouble(l.s)
			if !ok {
				return 0, false
			}
			return compareDouble(lf, r.f), true
		}
	}
	// Any other mix (Boolean vs number, number vs Boolean): Java's
	// __compare gives up and returns -1, i.e. "less than". So = is FALSE,
	// < and <= are TRUE and > and >= are FALSE. Kept for compatibility.
	return -1, true
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	default:
		return 0
	}
}

// compareDouble is Java's Double.compare: numeric order, except that -0.0
// is less than 0.0 and NaN equals itself and is greater than everything,
// +Inf included.
func compareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	ab, bb := int64(math.Float64bits(a)), int64(math.Float64bits(b))
	if a != a {
		ab = 0x7ff8000000000000 // canonical NaN, as doubleToLongBits
	}
	if b != b {
		bb = 0x7ff8000000000000
	}
	return compareInt(ab, bb)
}

// parseJavaInt parses s like Java's Integer.valueOf (long == false) or
// Long.valueOf (long == true): an optional '+' or '-', then one or more
// decimal digits, nothing else (no spaces), within range. Java also accepts
// non-ASCII Unicode digits here; this implementation accepts ASCII digits only.
func parseJavaInt(s string, long bool) (int64, bool) {
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	if long {
		lo, hi = math.MinInt64, math.MaxInt64
	}
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	// Accumulate negatively so that the minimum value is representable.
	var n int64
	for ; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) {
			return 0, false
		}
		d := int64(c - '0')
		if n < lo/10 {
			return 0, false
		}
		n *= 10
		if n < lo+d {
			return 0, false
		}
		n -= d
	}
	if !neg {
		if n < -hi {
			return 0, false
		}
		n = -n
	}
	return n, true
}

// parseJavaDouble parses s like Java's Double.valueOf: leading and trailing
// characters <= ' ' are trimmed; then an optional sign and either "NaN",
// "Infinity", a decimal number ("1", "1.", ".5", "1.5e-3") or a hexadecimal
// one with a mandatory binary exponent ("0x1.8p1"), the numbers optionally
// followed by one of the type suffixes f, F, d, D. Values too large for a
// double are infinite, as in Java. strconv.ParseFloat alone is more lenient
// (it accepts "inf", "infinity", underscores, hex without a 'p'...), so the
// syntax is checked here first.
func parseJavaDouble(s string) (float64, bool) {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	s = s[i:j]

	k := 0
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		k++
	}
	switch s[k:] {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if n := len(s); n > k {
		switch s[n-1] {
		case 'f', 'F', 'd', 'D':
			s = s[:n-1]
		}
	}
	if body := s[k:]; !isJavaDecimal(body) && !isJavaHex(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}

// isJavaDecimal reports whether s is digits with an optional '.' (at least
// one digit in all) and an optional exponent [eE][+-]?digits.
func isJavaDecimal(s string) bool {
	i, nd := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, nd = i+1, nd+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, nd = i+1, nd+1
		}
	}
	if nd == 0 {
		return false
	}
	return isExponent(s[i:], 'e')
}

// isJavaHex reports whether s is 0x/0X, hex digits with an optional '.' (at
// least one digit in all) and a mandatory exponent [pP][+-]?digits.
func isJavaHex(s string) bool {
	if len(s) < 2 || s[0] != '0' || s[1] != 'x' && s[1] != 'X' {
		return false
	}
	isHex := func(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
	i, nd := 2, 0
	for i < len(s) && isHex(s[i]) {
		i, nd = i+1, nd+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHex(s[i]) {
			i, nd = i+1, nd+1
		}
	}
	if nd == 0 || i == len(s) {
		return false
	}
	return isExponent(s[i:], 'p')
}

// isExponent reports whether s is empty (for letter 'e') or an exponent
// introduced by letter (either case): letter [+-]? digits.
func isExponent(s string, letter byte) bool {
	if s == "" {
		return letter == 'e'
	}
	if s[0] != letter && s[0] != letter-'a'+'A' {
		return false
	}
	i := 1
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i == len(s) {
		return false
	}
	for ; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
