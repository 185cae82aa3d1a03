package sqlfilter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tID
	tDecimal // DECIMAL_LITERAL
	tFloat   // FLOATING_POINT_LITERAL
	tString  // STRING_LITERAL

	// Keywords (case-insensitive).
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith

	// Operators and punctuation.
	tEq     // =
	tNe     // <>
	tGt     // >
	tGe     // >=
	tLt     // <
	tLe     // <=
	tLParen // (
	tRParen // )
	tComma  // ,
	tPlus   // +
	tMinus  // -
)

var keywords = map[string]tokKind{
	"NOT":        tNot,
	"AND":        tAnd,
	"OR":         tOr,
	"BETWEEN":    tBetween,
	"IN":         tIn,
	"TRUE":       tTrue,
	"FALSE":      tFalse,
	"NULL":       tNull,
	"IS":         tIs,
	"CONTAINS":   tContains,
	"STARTSWITH": tStartsWith,
	"ENDSWITH":   tEndsWith,
}

// token is one lexical token. text is its source image; for a string
// literal, str is the decoded value (” turned into ').
type token struct {
	kind tokKind
	pos  int // byte offset in the source
	text string
	str  string
}

// describe names a token for error messages.
func (t token) describe() string {
	if t.kind == tEOF {
		return "end of input"
	}
	return fmt.Sprintf("%q", t.text)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIDStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$'
}

func isIDPart(c byte) bool { return isIDStart(c) || isDigit(c) }

// lex splits src into tokens, ending with a tEOF token. Like the JavaCC
// token manager it always takes the longest match at each position.
func lex(src string) ([]token, error) {
	var toks []token
	// Offset of the last newline, so that a "--" after it is known not to
	// start a comment without rescanning the rest of the input each time.
	lastNL := strings.LastIndexAny(src, "\r\n")
	i := 0
	for i < len(src) {
		c := src[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue

		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			// A line comment must end with a newline; "--" with no newline
			// after it is not a comment but two '-' tokens (JavaCC's
			// LINE_COMMENT requires the terminator).
			if lastNL > i+1 {
				i += 2 + strings.IndexAny(src[i+2:], "\r\n") + 1
				continue
			}
			toks = append(toks, token{kind: tMinus, pos: i, text: "-"})
			i++
			continue

		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("sqlfilter: offset %d: unterminated block comment", i)
			}
			i += 2 + end + 2
			continue

		case c == '\'':
			j := i + 1
			closed := false
			for j < len(src) {
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						j += 2
						continue
					}
					j++
					closed = true
					break
				}
				j++
			}
			if !closed {
				return nil, fmt.Errorf("sqlfilter: offset %d: unterminated string literal", i)
			}
			// Every quote inside the literal is part of a '' pair, so a
			// left-to-right replacement decodes it exactly.
			text := src[i:j]
			toks = append(toks, token{kind: tString, pos: i, text: text,
				str: strings.ReplaceAll(text[1:len(text)-1], "''", "'")})
			i = j
			continue

		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			kind, end := lexNumber(src, i)
			toks = append(toks, token{kind: kind, pos: i, text: src[i:end]})
			i = end
			continue

		case isIDStart(c):
			j := i + 1
			for j < len(src) && isIDPart(src[j]) {
				j++
			}
			text := src[i:j]
			kind := tID
			if k, ok := keywords[strings.ToUpper(text)]; ok {
				kind = k
			}
			toks = append(toks, token{kind: kind, pos: i, text: text})
			i = j
			continue
		}

		// Operators.
		kind := tEOF
		n := 1
		switch c {
		case '=':
			kind = tEq
		case '<':
			kind = tLt
			if i+1 < len(src) {
				switch src[i+1] {
				case '>':
					kind, n = tNe, 2
				case '=':
					kind, n = tLe, 2
				}
			}
		case '>':
			kind = tGt
			if i+1 < len(src) && src[i+1] == '=' {
				kind, n = tGe, 2
			}
		case '(':
			kind = tLParen
		case ')':
			kind = tRParen
		case ',':
			kind = tComma
		case '+':
			kind = tPlus
		case '-':
			kind = tMinus
		}
		if kind == tEOF {
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, fmt.Errorf("sqlfilter: offset %d: unexpected character %q", start, r)
		}
		toks = append(toks, token{kind: kind, pos: i, text: src[i : i+n]})
		i += n
	}
	toks = append(toks, token{kind: tEOF, pos: len(src)})
	return toks, nil
}

// lexNumber scans a numeric literal at src[i] (a digit, or '.' followed by a
// digit) and returns its kind and end offset, choosing the longest match
// between
//
//	DECIMAL_LITERAL        "0" | [1-9][0-9]* [lL]?
//	FLOATING_POINT_LITERAL [0-9]+ "." [0-9]* EXP? | "." [0-9]+ EXP? | [0-9]+ EXP
//
// where EXP is [eE][+-]?[0-9]+. Note that the l/L suffix belongs to the
// second alternative of DECIMAL_LITERAL only, and that "0" is a whole
// DECIMAL_LITERAL: "007" is three tokens and "0L" is "0" followed by the
// identifier "L", as in RocketMQ.
func lexNumber(src string, i int) (tokKind, int) {
	digits := func(j int) int {
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		return j
	}
	exponent := func(j int) int { // end of EXP at j, or j if there is none
		if j >= len(src) || src[j] != 'e' && src[j] != 'E' {
			return j
		}
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && isDigit(src[k]) {
			return digits(k)
		}
		return j
	}

	if src[i] == '.' {
		return tFloat, exponent(digits(i + 1))
	}
	j := digits(i)
	if j < len(src) && src[j] == '.' {
		return tFloat, exponent(digits(j + 1))
	}
	if e := exponent(j); e > j {
		return tFloat, e
	}
	if src[i] == '0' {
		return tDecimal, i + 1
	}
	if j < len(src) && (src[j] == 'l' || src[j] == 'L') {
		j++
	}
	return tDecimal, j
}
