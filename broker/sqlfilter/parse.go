package sqlfilter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// opcode is the kind of an expression node.
type opcode uint8

const (
	// Value expressions.
	opConst opcode = iota // literal: string, number, TRUE, FALSE, NULL (val)
	opProp                // property reference (name)
	opNeg                 // -l

	// Boolean expressions. They must stay after the value expressions:
	// isBool relies on the order.
	opBoolCast   // property used where a boolean is needed (l)
	opEq         // l = r; also IS NULL, with r the NULL constant
	opGt         // l > r
	opGe         // l >= r
	opLt         // l < r
	opLe         // l <= r
	opBetween    // l [NOT] BETWEEN r AND x
	opNot        // NOT l
	opAnd        // l AND r
	opOr         // l OR r
	opIn         // l [NOT] IN (set)
	opContains   // l [NOT] CONTAINS name
	opStartsWith // l [NOT] STARTSWITH name
	opEndsWith   // l [NOT] ENDSWITH name
)

// inMapMin is the IN list length from which a map is used for lookups.
const inMapMin = 8

// node is one node of a compiled expression tree. Parentheses produce no
// node of their own, as in RocketMQ, so "(a)" is still a property.
type node struct {
	op       opcode
	not      bool   // NOT BETWEEN, NOT IN, NOT CONTAINS/STARTSWITH/ENDSWITH
	pos, end int    // source span, for error messages
	val      value  // opConst
	name     string // opProp: property name; opContains etc.: search string
	list     []string
	set      map[string]struct{} // opIn with len(list) >= inMapMin
	l, r, x  *node
}

// isConst reports whether n is a literal (RocketMQ's ConstantExpression).
func (n *node) isConst() bool { return n.op == opConst }

// isBoolConst reports whether n is TRUE, FALSE or NULL: RocketMQ parses all
// three as BooleanConstantExpression, so NULL counts as a boolean expression
// wherever one is required (the selector "NULL" compiles and never matches).
func (n *node) isBoolConst() bool {
	return n.op == opConst && (n.val.k == vBool || n.val.k == vNull)
}

// isBool reports whether n is a boolean expression (RocketMQ's
// BooleanExpression).
func (n *node) isBool() bool {
	return n.op >= opBoolCast || n.isBoolConst()
}

// binaryOps maps operator tokens of cmpExpr to their opcodes.
var binaryOps = map[tokKind]opcode{
	tGt: opGt, tGe: opGe, tLt: opLt, tLe: opLe,
	tContains: opContains, tStartsWith: opStartsWith, tEndsWith: opEndsWith,
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
}

// parse compiles src to an expression tree whose value is boolean.
func parse(src string) (*node, error) {
	if len(src) > MaxLength {
		return nil, fmt.Errorf("sqlfilter: expression is %d bytes long, longer than the maximum of %d", len(src), MaxLength)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	n, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	// RocketMQ's generated parser stops after the expression and ignores
	// what follows; trailing tokens are an error here.
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t.pos, "unexpected %s after a complete expression", t.describe())
	}
	return p.asBoolean(n)
}

func (p *parser) peek() token { return p.toks[p.i] }

// peek2 returns the token after the next one (tEOF at the end).
func (p *parser) peek2() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return fmt.Errorf("sqlfilter: offset %d: "+format, append([]any{pos}, args...)...)
}

func (p *parser) expect(kind tokKind, what string) (token, error) {
	t := p.peek()
	if t.kind != kind {
		return t, p.errorf(t.pos, "expected %s, found %s", what, t.describe())
	}
	return p.next(), nil
}

// enter and leave bracket one level of nesting.
func (p *parser) enter(pos int) error {
	if p.depth >= maxDepth {
		return p.errorf(pos, "expression nested more than %d levels deep", maxDepth)
	}
	p.depth++
	return nil
}

func (p *parser) leave() { p.depth-- }

// text is the source of n, for error messages.
func (p *parser) text(n *node) string { return p.src[n.pos:n.end] }

// asBoolean is RocketMQ's asBooleanExpression: boolean expressions are used
// as they are, a property is cast (missing: NULL; present: FALSE, since a
// property value is a string, never a Boolean), anything else is an error.
func (p *parser) asBoolean(n *node) (*node, error) {
	switch {
	case n.isBool():
		return n, nil
	case n.op == opProp:
		return &node{op: opBoolCast, pos: n.pos, end: n.end, l: n}, nil
	}
	return nil, p.errorf(n.pos, "expression will not result in a boolean value: %s", p.text(n))
}

// logic builds l AND r or l OR r.
func (p *parser) logic(op opcode, l, r *node) (*node, error) {
	l, err := p.asBoolean(l)
	if err != nil {
		return nil, err
	}
	r, err = p.asBoolean(r)
	if err != nil {
		return nil, err
	}
	return &node{op: op, pos: l.pos, end: r.end, l: l, r: r}, nil
}

// orExpr := andExpr ( OR andExpr )*
func (p *parser) orExpr() (*node, error) {
	l, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tOr {
		p.next()
		r, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		if l, err = p.logic(opOr, l, r); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// andExpr := eqExpr ( AND eqExpr )*
func (p *parser) andExpr() (*node, error) {
	l, err := p.eqExpr()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tAnd {
		p.next()
		r, err := p.eqExpr()
		if err != nil {
			return nil, err
		}
		if l, err = p.logic(opAnd, l, r); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// eqExpr := cmpExpr ( "=" cmpExpr | "<>" cmpExpr | IS NULL | IS NOT NULL )*
func (p *parser) eqExpr() (*node, error) {
	l, err := p.cmpExpr()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch t.kind {
		case tEq, tNe:
			p.next()
			r, err := p.cmpExpr()
			if err != nil {
				return nil, err
			}
			if l, err = p.equal(t, l, r); err != nil {
				return nil, err
			}
			if t.kind == tNe {
				l = &node{op: opNot, pos: l.pos, end: l.end, l: l}
			}
		case tIs:
			p.next()
			not := false
			if p.peek().kind == tNot {
				p.next()
				not = true
			}
			nt, err := p.expect(tNull, "NULL or NOT NULL after IS")
			if err != nil {
				return nil, err
			}
			// x IS NULL is x = NULL without the operand checks of "=".
			nullConst := &node{op: opConst, pos: nt.pos, end: nt.pos + len(nt.text)}
			l = &node{op: opEq, pos: l.pos, end: nullConst.end, l: l, r: nullConst}
			if not {
				l = &node{op: opNot, pos: l.pos, end: l.end, l: l}
			}
		default:
			return l, nil
		}
	}
}

// equal builds l = r with RocketMQ's checks (createEqual): neither side may
// be the NULL literal, and a TRUE/FALSE literal on the left may only be
// compared with a boolean literal when both sides are literals.
func (p *parser) equal(op token, l, r *node) (*node, error) {
	for _, n := range []*node{l, r} {
		if n.isConst() && n.val.k == vNull {
			return nil, p.errorf(n.pos, "NULL cannot be compared with %s; use IS NULL or IS NOT NULL", op.text)
		}
	}
	if l.isConst() && r.isConst() && l.isBoolConst() && !r.isBoolConst() {
		return nil, p.errorf(op.pos, "%s cannot be compared with %s", p.text(l), p.text(r))
	}
	return &node{op: opEq, pos: l.pos, end: r.end, l: l, r: r}, nil
}

// ordered checks an operand of >, >=, <, <= and BETWEEN
// (checkLessThanOperand): a literal must be a number, and a boolean
// expression is never allowed.
func (p *parser) ordered(op token, n *node) error {
	if n.isConst() && (n.val.k == vInt || n.val.k == vFloat) {
		return nil
	}
	if n.isConst() || n.isBool() {
		return p.errorf(n.pos, "value %s cannot be compared with %s", p.text(n), op.text)
	}
	return nil
}

// cmpExpr := unary ( (">"|">="|"<"|"<=") unary
//
//	| [NOT] (CONTAINS|STARTSWITH|ENDSWITH) string
//	| [NOT] BETWEEN unary AND unary
//	| [NOT] IN "(" string ("," string)* ")" )*
func (p *parser) cmpExpr() (*node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.next()
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			if err := p.ordered(t, l); err != nil {
				return nil, err
			}
			if err := p.ordered(t, r); err != nil {
				return nil, err
			}
			l = &node{op: binaryOps[t.kind], pos: l.pos, end: r.end, l: l, r: r}
			continue
		case tNot:
			switch p.peek2().kind {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
			default:
				return nil, p.errorf(p.peek2().pos, "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT, found %s", p.peek2().describe())
			}
		case tContains, tStartsWith, tEndsWith, tBetween, tIn:
		default:
			return l, nil
		}

		not := false
		if t.kind == tNot {
			p.next()
			not = true
		}
		t = p.next()
		switch t.kind {
		case tContains, tStartsWith, tEndsWith:
			s, err := p.expect(tString, "string literal after "+t.text)
			if err != nil {
				return nil, err
			}
			l = &node{op: binaryOps[t.kind], not: not, pos: l.pos, end: s.pos + len(s.text), l: l, name: s.str}
		case tBetween:
			if l, err = p.between(t, l, not); err != nil {
				return nil, err
			}
		case tIn:
			if l, err = p.in(t, l, not); err != nil {
				return nil, err
			}
		}
	}
}

// between parses the bounds of [NOT] BETWEEN low AND high.
func (p *parser) between(op token, x *node, not bool) (*node, error) {
	low, err := p.unary()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tAnd, "AND in BETWEEN"); err != nil {
		return nil, err
	}
	high, err := p.unary()
	if err != nil {
		return nil, err
	}
	for _, n := range []*node{x, low, high} {
		if err := p.ordered(op, n); err != nil {
			return nil, err
		}
	}
	// RocketMQ checks the order of literal bounds for BETWEEN only, not for
	// NOT BETWEEN (createNotBetween has no such check).
	if !not && low.isConst() && high.isConst() {
		if c, _ := compare(high.val, low.val); c < 0 {
			return nil, p.errorf(low.pos, "illegal BETWEEN bounds: low value %s is greater than high value %s", p.text(low), p.text(high))
		}
	}
	return &node{op: opBetween, not: not, pos: x.pos, end: high.end, l: x, r: low, x: high}, nil
}

// in parses the list of [NOT] IN ( 'a', 'b', ... ).
func (p *parser) in(op token, x *node, not bool) (*node, error) {
	if _, err := p.expect(tLParen, "'(' after IN"); err != nil {
		return nil, err
	}
	n := &node{op: opIn, not: not, pos: x.pos, l: x}
	for {
		s, err := p.expect(tString, "string literal in IN list")
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, s.str)
		t := p.next()
		if t.kind == tRParen {
			n.end = t.pos + 1
			break
		}
		if t.kind != tComma {
			return nil, p.errorf(t.pos, "expected ',' or ')' in IN list, found %s", t.describe())
		}
	}
	if x.op != opProp {
		return nil, p.errorf(x.pos, "IN needs a property on its left, found %s", p.text(x))
	}
	if len(n.list) >= inMapMin {
		n.set = make(map[string]struct{}, len(n.list))
		for _, s := range n.list {
			n.set[s] = struct{}{}
		}
		n.list = nil
	}
	return n, nil
}

// unary := "+" unary | "-" unary | NOT unary | primary
func (p *parser) unary() (*node, error) {
	t := p.peek()
	switch t.kind {
	case tPlus, tMinus, tNot:
	default:
		return p.primary()
	}
	p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	x, err := p.unary()
	p.leave()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case tMinus:
		return &node{op: opNeg, pos: t.pos, end: x.end, l: x}, nil
	case tNot:
		x, err := p.asBoolean(x)
		if err != nil {
			return nil, err
		}
		return &node{op: opNot, pos: t.pos, end: x.end, l: x}, nil
	}
	return x, nil // unary plus is a no-op
}

// primary := literal | ID | "(" orExpr ")"
func (p *parser) primary() (*node, error) {
	t := p.next()
	n := &node{op: opConst, pos: t.pos, end: t.pos + len(t.text)}
	switch t.kind {
	case tString:
		n.val = value{k: vString, s: t.str}
	case tDecimal:
		v, err := decimalLiteral(t.text)
		if err != nil {
			return nil, p.errorf(t.pos, "%v", err)
		}
		n.val = v
	case tFloat:
		v, err := floatLiteral(t.text)
		if err != nil {
			return nil, p.errorf(t.pos, "%v", err)
		}
		n.val = v
	case tTrue:
		n.val = trueValue
	case tFalse:
		n.val = falseValue
	case tNull:
		n.val = null
	case tID:
		n.op = opProp
		n.name = t.text
	case tLParen:
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		x, err := p.orExpr()
		p.leave()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, "')'"); err != nil {
			return nil, err
		}
		return x, nil
	default:
		return nil, p.errorf(t.pos, "expected expression, found %s", t.describe())
	}
	return n, nil
}

// decimalLiteral is ConstantExpression.createFromDecimal: an optional l/L
// suffix is dropped, the value must fit in a Java long, and it is an Integer
// when it fits in 32 bits, a Long otherwise.
func decimalLiteral(text string) (value, error) {
	digits := strings.TrimRight(text, "lL")
	i, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return value{}, fmt.Errorf("integer literal %s is out of range (it must fit in 64 bits)", text)
	}
	return intValue(i), nil
}

// floatLiteral is ConstantExpression.createFloat. Besides values too large
// for a double, RocketMQ rejects every literal below Double.MIN_VALUE
// (4.9e-324, the smallest positive double), and since a literal has no sign
// that means every literal whose value is zero: 0.0, .0, 0e5, and values such
// as 1e-400 that round to zero. Negative numbers are negations (-1.5), so
// they are unaffected.
func floatLiteral(text string) (value, error) {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return value{}, fmt.Errorf("invalid float literal %s", text)
	}
	if f > math.MaxFloat64 {
		return value{}, fmt.Errorf("float literal %s is greater than %g", text, math.MaxFloat64)
	}
	if f < math.SmallestNonzeroFloat64 {
		return value{}, fmt.Errorf("float literal %s is less than %g (zero is not a valid float literal in RocketMQ)", text, math.SmallestNonzeroFloat64)
	}
	return value{k: vFloat, f: f}, nil
}
