package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Serialize types of a header.
const (
	JSON     byte = 0
	RocketMQ byte = 1
)

// Flag bits.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Limits.
const (
	// DefaultMaxFrame is upstream's frame limit (16 MiB).
	DefaultMaxFrame = 16 << 20
	// MaxHeaderLen is what the 24-bit header length can express.
	MaxHeaderLen = 1<<24 - 1
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("remoting: malformed frame")

// Command is one request or response.
type Command struct {
	Code     int32
	Language string
	Version  int32
	Opaque   int32
	Flag     int32
	Remark   string
	Ext      map[string]string
	Body     []byte
	// Serialize is the header type the command arrived in.
	Serialize byte
}

// IsResponse reports the response flag bit.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports the oneway flag bit (no response wanted).
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Get returns an ext field.
func (c *Command) Get(key string) string { return c.Ext[key] }

// Set sets an ext field.
func (c *Command) Set(key, value string) {
	if c.Ext == nil {
		c.Ext = make(map[string]string, 8)
	}
	c.Ext[key] = value
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// ReadFrame reads one frame and returns what follows its length field
// (type, header length, header, body). A length below 4 or above max is
// refused before anything more is read.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	n, err := ReadLength(r, max)
	if err != nil {
		return nil, err
	}
	return ReadRest(r, n)
}

// ReadLength reads and checks a frame's length field (4 ≤ n ≤ max), so a
// caller can reserve memory before ReadRest allocates it.
func ReadLength(r io.Reader, max int) (int, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n < 4 {
		return 0, malformed("frame length %d is below 4", n)
	}
	if uint64(n) > uint64(max) {
		return 0, malformed("frame length %d exceeds the limit %d", n, max)
	}
	return int(n), nil
}

// ReadRest reads the n bytes of a frame that follow its length field.
func ReadRest(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// Decode parses a frame (as returned by ReadFrame). The command's Body
// aliases frame.
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, malformed("frame of %d bytes has no header length", len(frame))
	}
	v := binary.BigEndian.Uint32(frame)
	typ, hl := byte(v>>24), int(v&0x00FFFFFF)
	if hl > len(frame)-4 {
		return nil, malformed("header length %d exceeds the %d bytes left", hl, len(frame)-4)
	}
	hdr, body := frame[4:4+hl], frame[4+hl:]
	var c *Command
	var err error
	switch typ {
	case JSON:
		c, err = decodeJSON(hdr)
	case RocketMQ:
		c, err = decodeBinary(hdr)
	default:
		return nil, malformed("unknown serialize type %d", typ)
	}
	if err != nil {
		return nil, err
	}
	c.Serialize = typ
	if len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

type jsonHeader struct {
	Code      *json.Number               `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   *json.Number               `json:"version"`
	Opaque    *json.Number               `json:"opaque"`
	Flag      *json.Number               `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

func int32Of(n *json.Number, name string) (int32, error) {
	if n == nil {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(*n), 10, 32)
	if err != nil {
		return 0, malformed("header member %q is not a 32-bit integer: %.20s", name, *n)
	}
	return int32(v), nil
}

func decodeJSON(b []byte) (*Command, error) {
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, malformed("JSON header: %v", err)
	}
	if h.Code == nil {
		return nil, malformed("JSON header has no code")
	}
	c := &Command{}
	var err error
	if c.Code, err = int32Of(h.Code, "code"); err != nil {
		return nil, err
	}
	if c.Version, err = int32Of(h.Version, "version"); err != nil {
		return nil, err
	}
	if c.Opaque, err = int32Of(h.Opaque, "opaque"); err != nil {
		return nil, err
	}
	if c.Flag, err = int32Of(h.Flag, "flag"); err != nil {
		return nil, err
	}
	var lang string
	if json.Unmarshal(h.Language, &lang) == nil {
		c.Language = lang
	}
	if h.Remark != nil {
		c.Remark = *h.Remark
	}
	if len(h.ExtFields) > 0 {
		c.Ext = make(map[string]string, len(h.ExtFields))
		for k, raw := range h.ExtFields {
			s, ok, err := extValue(raw)
			if err != nil {
				return nil, malformed("extFields[%q]: %v", k, err)
			}
			if ok {
				c.Ext[k] = s
			}
		}
	}
	return c, nil
}

// extValue accepts a string (the protocol's only type) and, leniently,
// numbers and booleans (their literal text); null drops the member.
func extValue(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 {
		return "", false, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		return s, true, nil
	case 'n':
		return "", false, nil
	case 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw), true, nil
	}
	return "", false, errors.New("not a string")
}

// languages are the LanguageCode ordinals of the binary header.
var languages = [...]string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

// LanguageName returns the name of a language ordinal ("OTHER" when unknown).
func LanguageName(b byte) string {
	if int(b) < len(languages) {
		return languages[b]
	}
	return "OTHER"
}

// LanguageCode returns the ordinal of a language name (OTHER when unknown).
func LanguageCode(s string) byte {
	for i, n := range languages {
		if n == s {
			return byte(i)
		}
	}
	return 7
}

const binaryFixed = 2 + 1 + 2 + 4 + 4 + 4

func decodeBinary(b []byte) (*Command, error) {
	if len(b) < binaryFixed+4 {
		return nil, malformed("binary header of %d bytes is shorter than its fixed part", len(b))
	}
	be := binary.BigEndian
	c := &Command{
		Code:     int32(int16(be.Uint16(b[0:]))),
		Language: LanguageName(b[2]),
		Version:  int32(int16(be.Uint16(b[3:]))),
		Opaque:   int32(be.Uint32(b[5:])),
		Flag:     int32(be.Uint32(b[9:])),
	}
	p := 13
	rl := int32(be.Uint32(b[p:]))
	p += 4
	if rl < 0 || int(rl) > len(b)-p {
		return nil, malformed("remark length %d exceeds the %d header bytes left", rl, len(b)-p)
	}
	c.Remark = string(b[p : p+int(rl)])
	p += int(rl)
	if len(b)-p < 4 {
		return nil, malformed("binary header ends before the ext length")
	}
	el := int32(be.Uint32(b[p:]))
	p += 4
	if el < 0 || int(el) != len(b)-p {
		return nil, malformed("ext length %d does not match the %d header bytes left", el, len(b)-p)
	}
	for p < len(b) {
		if len(b)-p < 2 {
			return nil, malformed("ext block ends inside a key length")
		}
		kl := int(int16(be.Uint16(b[p:])))
		p += 2
		if kl < 0 || kl > len(b)-p {
			return nil, malformed("ext key length %d exceeds the %d bytes left", kl, len(b)-p)
		}
		k := string(b[p : p+kl])
		p += kl
		if len(b)-p < 4 {
			return nil, malformed("ext block ends inside a value length")
		}
		vl := int32(be.Uint32(b[p:]))
		p += 4
		if vl < 0 || int(vl) > len(b)-p {
			return nil, malformed("ext value length %d exceeds the %d bytes left", vl, len(b)-p)
		}
		if c.Ext == nil {
			c.Ext = make(map[string]string, 8)
		}
		c.Ext[k] = string(b[p : p+int(vl)])
		p += int(vl)
	}
	return c, nil
}

// AppendFrame appends c as a complete frame (length included) with a
// header of serialize type typ. Map order is sorted so frames are
// deterministic.
func AppendFrame(dst []byte, c *Command, typ byte) ([]byte, error) {
	start := len(dst)
	dst, err := AppendFrameHeader(dst, c, typ)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, c.Body...), nil
}

// AppendFrameHeader appends everything of c's frame but the body, which
// the caller writes right after (a vectored write avoids copying it).
func AppendFrameHeader(dst []byte, c *Command, typ byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	switch typ {
	case JSON:
		dst = appendJSONHeader(dst, c)
	case RocketMQ:
		var err error
		if dst, err = appendBinaryHeader(dst, c); err != nil {
			return dst[:start], err
		}
	default:
		return dst[:start], fmt.Errorf("remoting: unknown serialize type %d", typ)
	}
	hl := len(dst) - start - 8
	if hl > MaxHeaderLen {
		return dst[:start], fmt.Errorf("remoting: header of %d bytes exceeds %d", hl, MaxHeaderLen)
	}
	total := len(dst) - start - 4 + len(c.Body)
	if uint64(total) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("remoting: frame of %d bytes is too large", total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(typ)<<24|uint32(hl))
	return dst, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	lang := c.Language
	if lang == "" {
		lang = "JAVA"
	}
	dst = AppendJSONString(dst, lang)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = AppendJSONString(dst, c.Remark)
	}
	dst = append(dst, `,"extFields":{`...)
	for i, k := range sortedKeys(c.Ext) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = AppendJSONString(dst, c.Ext[k])
	}
	dst = append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string. Control characters are
// escaped (\u0001 and \u0002 of property strings included) and invalid
// UTF-8 becomes U+FFFD, so the output is always valid JSON.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				switch c {
				case '\n':
					dst = append(dst, '\\', 'n')
				case '\r':
					dst = append(dst, '\\', 'r')
				case '\t':
					dst = append(dst, '\\', 't')
				default:
					dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
				}
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

func appendBinaryHeader(dst []byte, c *Command) ([]byte, error) {
	if c.Code < math.MinInt16 || c.Code > math.MaxInt16 {
		return dst, fmt.Errorf("remoting: code %d does not fit a binary header (int16)", c.Code)
	}
	be := binary.BigEndian
	dst = be.AppendUint16(dst, uint16(int16(c.Code)))
	lang := c.Language
	if lang == "" {
		lang = "JAVA"
	}
	dst = append(dst, LanguageCode(lang))
	dst = be.AppendUint16(dst, uint16(int16(c.Version)))
	dst = be.AppendUint32(dst, uint32(c.Opaque))
	dst = be.AppendUint32(dst, uint32(c.Flag))
	dst = be.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for _, k := range sortedKeys(c.Ext) {
		if len(k) > math.MaxInt16 {
			return dst, fmt.Errorf("remoting: ext key of %d bytes", len(k))
		}
		dst = be.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = be.AppendUint32(dst, uint32(len(c.Ext[k])))
		dst = append(dst, c.Ext[k]...)
	}
	be.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst, nil
}
