package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Separators of the property string.
const (
	NameValueSep = '\x01'
	PropertySep  = '\x02'
)

// MaxPropertiesLen is the largest property string a record can carry
// (its length is a signed 16-bit field).
const MaxPropertiesLen = 1<<15 - 1

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("remoting: malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// Property is one key/value pair.
type Property struct{ Key, Value string }

// ParseProperties splits a property string. Items without a separator or
// with an empty key are skipped, as upstream does; a later duplicate key
// wins.
func ParseProperties(s string) []Property {
	if s == "" {
		return nil
	}
	out := make([]Property, 0, strings.Count(s, string(PropertySep))+1)
	for len(s) > 0 {
		item := s
		if i := strings.IndexByte(s, PropertySep); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		k, v, ok := strings.Cut(item, string(NameValueSep))
		if !ok || k == "" {
			continue
		}
		replaced := false
		for i := range out {
			if out[i].Key == k {
				out[i].Value, replaced = v, true
				break
			}
		}
		if !replaced {
			out = append(out, Property{k, v})
		}
	}
	return out
}

// AppendProperties appends the property string of props.
func AppendProperties(dst []byte, props []Property) []byte {
	for _, p := range props {
		dst = append(dst, p.Key...)
		dst = append(dst, NameValueSep)
		dst = append(dst, p.Value...)
		dst = append(dst, PropertySep)
	}
	return dst
}

// ValidProperty reports whether a key and value can travel in a property
// string (no separators).
func ValidProperty(k, v string) bool {
	return k != "" && !strings.ContainsAny(k, "\x01\x02") && !strings.ContainsAny(v, "\x01\x02")
}
