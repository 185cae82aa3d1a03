package deferred

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Token mints and checks opaque, authenticated references to a staged
// message (recall handles, transaction ids): prefix + base64url of
// offset (8) | due ms (8) | topic hash (4) | HMAC-SHA256 truncated (12).
type Token struct {
	prefix string
	key    []byte
}

// LoadToken loads (or creates on first use) the key kept in blob name.
func LoadToken(blobs Blobs, name, prefix string) (*Token, error) {
	key, ok, err := blobs.LoadBlob(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !ok {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := blobs.SaveBlob(name, key); err != nil {
			return nil, fmt.Errorf("saving %s: %w", name, err)
		}
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("%s is damaged (%d bytes)", name, len(key))
	}
	return &Token{prefix: prefix, key: key}, nil
}

const tokenLen = 8 + 8 + 4 + 12

// tokenB64 decodes tokens: strict, so that the unused low bits of the last
// character must be zero and a minted token has no other accepted spelling.
var tokenB64 = base64.RawURLEncoding.Strict()

// TopicHash is the 32-bit FNV-1a of a topic name.
func TopicHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Encode mints a token.
func (t *Token) Encode(off, due int64, topic string) string {
	var b [tokenLen]byte
	binary.BigEndian.PutUint64(b[0:], uint64(off))
	binary.BigEndian.PutUint64(b[8:], uint64(due))
	binary.BigEndian.PutUint32(b[16:], TopicHash(topic))
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(t.prefix))
	m.Write(b[:20])
	copy(b[20:], m.Sum(nil))
	return t.prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// ErrBadToken wraps every decode failure.
var ErrBadToken = errors.New("malformed or forged")

// Decode checks a token and returns its offset and due time; topic must
// match the one it was minted for.
func (t *Token) Decode(s, topic string) (off, due int64, err error) {
	enc, ok := strings.CutPrefix(s, t.prefix)
	if !ok || base64.RawURLEncoding.DecodedLen(len(enc)) != tokenLen {
		return 0, 0, ErrBadToken
	}
	var b [tokenLen]byte
	if n, err := tokenB64.Decode(b[:], []byte(enc)); err != nil || n != tokenLen {
		return 0, 0, ErrBadToken
	}
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(t.prefix))
	m.Write(b[:20])
	if !hmac.Equal(b[20:], m.Sum(nil)[:12]) {
		return 0, 0, ErrBadToken
	}
	if binary.BigEndian.Uint32(b[16:]) != TopicHash(topic) {
		return 0, 0, fmt.Errorf("%w: issued for another topic", ErrBadToken)
	}
	return int64(binary.BigEndian.Uint64(b[0:])), int64(binary.BigEndian.Uint64(b[8:])), nil
}
