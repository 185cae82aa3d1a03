package sqlfilter

import "strings"

// eval evaluates n against p. Boolean expressions yield TRUE, FALSE or NULL
// (a vBool or vNull value). ok is false on an evaluation error, which
// propagates to the whole expression (RocketMQ throws, and the message does
// not match). Operands are evaluated in the same order, with the same
// short-circuits, as RocketMQ, so errors surface in the same cases.
func (n *node) eval(p Properties) (v value, ok bool) {
	switch n.op {
	case opConst:
		return n.val, true
	case opProp:
		s, found := p.Get(n.name)
		if !found {
			return null, true
		}
		return value{k: vString, s: s}, true
	case opNeg:
		x, ok := n.l.eval(p)
		if !ok {
			return null, false
		}
		return negate(x), true
	case opBoolCast:
		x, ok := n.l.eval(p)
		switch {
		case !ok:
			return null, false
		case x.k == vNull, x.k == vBool:
			return x, true
		}
		return falseValue, true // a present property is a string, not a Boolean
	case opEq:
		return n.evalEq(p)
	case opGt, opGe, opLt, opLe:
		l, ok := n.l.eval(p)
		if !ok {
			return null, false
		}
		return order(n.op, l, n.r, p)
	case opBetween:
		return n.evalBetween(p)
	case opNot:
		x, ok := n.l.eval(p)
		switch {
		case !ok || !isLogical(x):
			return null, false
		case x.k == vNull:
			return null, true
		}
		return boolValue(!x.b), true
	case opAnd, opOr:
		return n.evalLogic(p)
	case opIn:
		return n.evalIn(p)
	case opContains, opStartsWith, opEndsWith:
		return n.evalStringTest(p)
	}
	return null, false
}

// evalEq evaluates l = r (and x IS NULL).
func (n *node) evalEq(p Properties) (value, bool) {
	l, ok := n.l.eval(p)
	if !ok {
		return null, false
	}
	r, ok := n.r.eval(p)
	if !ok {
		return null, false
	}
	// NULL on the left only is NULL, NULL on the right only is FALSE, both
	// NULL is TRUE; "x IS NULL" relies on the last two.
	switch {
	case l.k == vNull && r.k == vNull:
		return trueValue, true
	case l.k == vNull:
		return null, true
	case r.k == vNull:
		return falseValue, true
	}
	c, ok := compare(l, r)
	if !ok {
		return null, false
	}
	return boolValue(c == 0), true
}

// evalBetween evaluates x BETWEEN lo AND hi as (x >= lo AND x <= hi), and
// x NOT BETWEEN lo AND hi as (x < lo OR x > hi). x is evaluated once: it is
// deterministic, and evaluating it for each comparison would make nested
// BETWEENs exponential.
func (n *node) evalBetween(p Properties) (value, bool) {
	x, ok := n.l.eval(p)
	if !ok {
		return null, false
	}
	if !n.not {
		a, ok := order(opGe, x, n.r, p)
		if !ok || isFalse(a) {
			return a, ok
		}
		b, ok := order(opLe, x, n.x, p)
		if !ok || isFalse(b) {
			return b, ok
		}
		if a.k == vNull || b.k == vNull {
			return null, true
		}
		return trueValue, true
	}
	a, ok := order(opLt, x, n.r, p)
	if !ok || isTrue(a) {
		return a, ok
	}
	b, ok := order(opGt, x, n.x, p)
	if !ok || isTrue(b) {
		return b, ok
	}
	if a.k == vNull || b.k == vNull {
		return null, true
	}
	return falseValue, true
}

// evalLogic evaluates l AND r or l OR r. The right side is not evaluated
// when the left decides (FALSE for AND, TRUE for OR); otherwise a deciding
// right side wins over a NULL left, and NULL remains if either is NULL.
func (n *node) evalLogic(p Properties) (value, bool) {
	decisive := n.op == opOr // the value that decides: TRUE for OR, FALSE for AND
	l, ok := n.l.eval(p)
	if !ok || !isLogical(l) {
		return null, false
	}
	if l.k == vBool && l.b == decisive {
		return l, true
	}
	r, ok := n.r.eval(p)
	if !ok || !isLogical(r) {
		return null, false
	}
	if r.k == vBool && r.b == decisive {
		return r, true
	}
	if l.k == vNull || r.k == vNull {
		return null, true
	}
	return boolValue(!decisive), true
}

// evalIn evaluates x [NOT] IN (...): NULL unless x is a string.
func (n *node) evalIn(p Properties) (value, bool) {
	x, ok := n.l.eval(p)
	if !ok {
		return null, false
	}
	if x.k != vString {
		return null, true
	}
	var found bool
	if n.set != nil {
		_, found = n.set[x.s]
	} else {
		for _, s := range n.list {
			if s == x.s {
				found = true
				break
			}
		}
	}
	return boolValue(found != n.not), true
}

// evalStringTest evaluates [NOT] CONTAINS, STARTSWITH and ENDSWITH. An
// empty search string, a NULL and a non-string all give FALSE, for the NOT
// forms too (RocketMQ's ContainsExpression, NotContainsExpression etc.);
// with an empty search string the operand is not even evaluated.
func (n *node) evalStringTest(p Properties) (value, bool) {
	if n.name == "" {
		return falseValue, true
	}
	x, ok := n.l.eval(p)
	if !ok {
		return null, false
	}
	if x.k != vString {
		return falseValue, true
	}
	var hit bool
	switch n.op {
	case opContains:
		hit = strings.Contains(x.s, n.name)
	case opStartsWith:
		hit = strings.HasPrefix(x.s, n.name)
	default:
		hit = strings.HasSuffix(x.s, n.name)
	}
	return boolValue(hit != n.not), true
}

// order evaluates l op r for op one of >, >=, <, <=, l already evaluated.
// As in RocketMQ, a NULL left side gives NULL without evaluating the right.
// Two strings (typically two properties) are both parsed as doubles, and a
// failure is an error; other pairs follow compare's conversions.
func order(op opcode, l value, rn *node, p Properties) (value, bool) {
	if l.k == vNull {
		return null, true
	}
	r, ok := rn.eval(p)
	if !ok {
		return null, false
	}
	if r.k == vNull {
		return null, true
	}
	var c int
	if l.k == vString && r.k == vString {
		lf, ok1 := parseJavaDouble(l.s)
		rf, ok2 := parseJavaDouble(r.s)
		if !ok1 || !ok2 {
			return null, false
		}
		c = compareDouble(lf, rf)
	} else if c, ok = compare(l, r); !ok {
		return null, false
	}
	switch op {
	case opGt:
		return boolValue(c > 0), true
	case opGe:
		return boolValue(c >= 0), true
	case opLt:
		return boolValue(c < 0), true
	default:
		return boolValue(c <= 0), true
	}
}

func isTrue(v value) bool  { return v.k == vBool && v.b }
func isFalse(v value) bool { return v.k == vBool && !v.b }

// isLogical reports whether v can be an operand of AND/OR (Java casts it to
// Boolean; anything else would throw).
func isLogical(v value) bool { return v.k == vBool || v.k == vNull }
