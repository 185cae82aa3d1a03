package httpserver

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// The REST send is the hottest call of the HTTP listener, and protojson's
// reflection costs more than the rest of its JSON handling. This file
// decodes a SendMessagesRequest and encodes a SendMessagesResponse by
// hand, exactly as protojson does with the marshaler's options:
//
//   - decodeSendRequest takes the common bodies only: an object of the
//     known fields under their JSON or proto names, strings without \u
//     escapes, base64 bodies, no nulls, no timestamps. Anything else
//     (every body protojson refuses among it) returns false and goes
//     through protojson, so its errors and their text do not change.
//   - appendSendResponse writes what protojson writes with
//     EmitDefaultValues, without the insignificant spaces protojson adds
//     at random, or returns false where protojson may fail (invalid UTF-8)
//     or the message holds something unusual.
//
// FuzzSendJSON and FuzzSendJSONResponse check both against protojson.

// Field bits of a decoded object, to refuse a field given twice.
const (
	fTopic = 1 << iota
	fMessages
	fText
	fBody
	fTag
	fKeys
	fProperties
	fMessageGroup
	fMessageID
)

// sendParser reads one JSON body; ok false means "not a plain body".
type sendParser struct {
	b []byte
	i int
}

// decodeSendRequest decodes body into req when it is a plain body (see
// above) and reports whether it did; req is left alone otherwise.
func decodeSendRequest(body []byte, req *restv1.SendMessagesRequest) bool {
	p := sendParser{b: body}
	var out restv1.SendMessagesRequest
	if !p.consume('{') {
		return false
	}
	var seen uint32
	for first := true; ; first = false {
		key, end, ok := p.nextKey(first)
		if !ok {
			return false
		}
		if end {
			break
		}
		switch string(key) {
		case "topic":
			if out.Topic, ok = p.stringValue(&seen, fTopic); !ok {
				return false
			}
		case "messages":
			if !p.mark(&seen, fMessages) || !p.consume('[') {
				return false
			}
			out.Messages = []*restv1.OutgoingMessage{}
			for first := true; ; first = false {
				end, ok := p.nextElem(first)
				if !ok {
					return false
				}
				if end {
					break
				}
				m, ok := p.message()
				if !ok {
					return false
				}
				out.Messages = append(out.Messages, m)
			}
		default:
			return false
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return false
	}
	req.Topic, req.Messages = out.Topic, out.Messages
	return true
}

func (p *sendParser) message() (*restv1.OutgoingMessage, bool) {
	m := &restv1.OutgoingMessage{}
	if !p.consume('{') {
		return nil, false
	}
	var seen uint32
	for first := true; ; first = false {
		key, end, ok := p.nextKey(first)
		if !ok {
			return nil, false
		}
		if end {
			return m, true
		}
		switch string(key) {
		case "text":
			if seen&fBody != 0 {
				return nil, false // the oneof is set already
			}
			s, ok := p.stringValue(&seen, fText)
			if !ok {
				return nil, false
			}
			m.Content = &restv1.OutgoingMessage_Text{Text: s}
		case "body":
			if seen&fText != 0 || !p.mark(&seen, fBody) {
				return nil, false
			}
			raw, ok := p.base64Str()
			if !ok {
				return nil, false
			}
			b, ok := decodeBase64(raw)
			if !ok {
				return nil, false
			}
			m.Content = &restv1.OutgoingMessage_Body{Body: b}
		case "tag":
			if m.Tag, ok = p.stringValue(&seen, fTag); !ok {
				return nil, false
			}
		case "messageGroup", "message_group":
			if m.MessageGroup, ok = p.stringValue(&seen, fMessageGroup); !ok {
				return nil, false
			}
		case "messageId", "message_id":
			if m.MessageId, ok = p.stringValue(&seen, fMessageID); !ok {
				return nil, false
			}
		case "keys":
			if !p.mark(&seen, fKeys) || !p.consume('[') {
				return nil, false
			}
			m.Keys = []string{}
			for first := true; ; first = false {
				end, ok := p.nextElem(first)
				if !ok {
					return nil, false
				}
				if end {
					break
				}
				raw, ok := p.str()
				if !ok {
					return nil, false
				}
				m.Keys = append(m.Keys, string(raw))
			}
		case "properties":
			if !p.mark(&seen, fProperties) || !p.consume('{') {
				return nil, false
			}
			m.Properties = map[string]string{}
			for first := true; ; first = false {
				k, end, ok := p.nextKey(first)
				if !ok {
					return nil, false
				}
				if end {
					break
				}
				v, ok := p.str()
				if !ok {
					return nil, false
				}
				if _, dup := m.Properties[string(k)]; dup {
					return nil, false
				}
				m.Properties[string(k)] = string(v)
			}
		default:
			return nil, false
		}
	}
}

// nextKey reads, within an object whose '{' was read, the '}' that ends
// it (end) or the next key and its ':'; first is true for the first call.
func (p *sendParser) nextKey(first bool) (key []byte, end, ok bool) {
	if p.consume('}') {
		return nil, true, true
	}
	if !first && !p.consume(',') {
		return nil, false, false
	}
	key, ok = p.str()
	if !ok || !p.consume(':') {
		return nil, false, false
	}
	return key, false, true
}

// nextElem reads, within an array whose '[' was read, the ']' that ends
// it (end) or the ',' before the next element; first is true for the
// first call.
func (p *sendParser) nextElem(first bool) (end, ok bool) {
	if p.consume(']') {
		return true, true
	}
	if !first && !p.consume(',') {
		return false, false
	}
	return false, true
}

// mark records field bit f, refusing a second one.
func (p *sendParser) mark(seen *uint32, f uint32) bool {
	if *seen&f != 0 {
		return false
	}
	*seen |= f
	return true
}

func (p *sendParser) stringValue(seen *uint32, f uint32) (string, bool) {
	if !p.mark(seen, f) {
		return "", false
	}
	raw, ok := p.str()
	return string(raw), ok
}

func (p *sendParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (p *sendParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string: its bytes (part of the body when it has no escape,
// a new slice otherwise). A control character, invalid UTF-8 or a \u
// escape is refused.
func (p *sendParser) str() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	var out []byte // nil until the first escape
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			if out != nil {
				s = append(out, s...)
			}
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, false
			}
			var e byte
			switch p.b[p.i+1] {
			case '"', '\\', '/':
				e = p.b[p.i+1]
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			default:
				return nil, false
			}
			out = append(append(out, p.b[start:p.i]...), e)
			p.i += 2
			start = p.i
		case c < 0x20:
			return nil, false
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			p.i++
		}
	}
	return nil, false
}

// base64Str reads the string of a bytes field. Without an escape, it
// checks only for the control characters the base64 decoder would skip
// (line breaks, which JSON refuses in a string): decodeBase64 refuses
// every other byte that is not base64, control characters and non-ASCII
// included.
func (p *sendParser) base64Str() ([]byte, bool) {
	start := p.i
	if !p.consume('"') {
		return nil, false
	}
	j := bytes.IndexByte(p.b[p.i:], '"')
	if j < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+j]
	if bytes.IndexByte(s, '\\') >= 0 {
		p.i = start
		return p.str()
	}
	if bytes.IndexByte(s, '\n') >= 0 || bytes.IndexByte(s, '\r') >= 0 {
		return nil, false
	}
	p.i += j + 1
	return s, true
}

// decodeBase64 decodes a bytes field as protojson does: standard or URL
// alphabet (URL when '-' or '_' appears), padded or not.
func decodeBase64(s []byte) ([]byte, bool) {
	enc := base64.StdEncoding
	if bytes.IndexByte(s, '-') >= 0 || bytes.IndexByte(s, '_') >= 0 {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(b, s)
	if err != nil {
		return nil, false
	}
	return b[:n], true
}

// appendSendResponse appends r as the marshaler writes it (see above), or
// reports false.
func appendSendResponse(out []byte, r *restv1.SendMessagesResponse) ([]byte, bool) {
	out = append(out, `{"results":[`...)
	for i, res := range r.GetResults() {
		if res == nil {
			return nil, false
		}
		if i > 0 {
			out = append(out, ',')
		}
		var ok bool
		out = append(out, `{"messageId":`...)
		if out, ok = appendJSONString(out, res.GetMessageId()); !ok {
			return nil, false
		}
		if st := res.GetStatus(); st != nil {
			out = append(out, `,"status":{"code":`...)
			out = strconv.AppendInt(out, int64(st.GetCode()), 10)
			out = append(out, `,"name":`...)
			if out, ok = appendJSONString(out, st.GetName()); !ok {
				return nil, false
			}
			out = append(out, `,"message":`...)
			if out, ok = appendJSONString(out, st.GetMessage()); !ok {
				return nil, false
			}
			out = append(out, '}')
		}
		out = append(out, '}')
	}
	return append(out, "]}"...), true
}

const lowerHex = "0123456789abcdef"

// appendJSONString quotes s as protojson does: '"', '\\' and control
// characters escaped (\b \f \n \r \t, else \u00xx), nothing else; false
// for invalid UTF-8, which protojson refuses.
func appendJSONString(out []byte, s string) ([]byte, bool) {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
		}
		i++
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"'), true
}

// sendResponseSize estimates the encoded size of r, to size the buffer
// once.
func sendResponseSize(r *restv1.SendMessagesResponse) int {
	n := 16
	for _, res := range r.GetResults() {
		n += 20 + len(res.GetMessageId())
		if st := res.GetStatus(); st != nil {
			n += 48 + len(st.GetName()) + len(st.GetMessage())
		}
	}
	return n
}
