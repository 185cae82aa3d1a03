package deferred

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker/keyring"
)

// Token mints and checks opaque, authenticated references to a staged
// message (recall handles, transaction ids): prefix + base64url of
// offset (8) | due ms (8) | topic hash (4) | HMAC-SHA256 truncated (12).
// The newest key of its ring signs; every key of the ring verifies
// (broker/keyring), so a rotated ring keeps earlier tokens valid.
type Token struct {
	prefix string
	ring   atomic.Pointer[keyring.Ring]
}

// Key names of the token rings in the metadata store's blobs.
const (
	TxnKeyBlob    = "transaction-id-key"
	RecallKeyBlob = "recall-handle-key"
)

// LoadToken loads the key ring kept in blob name (a single key of an
// older version reads as a ring of one), creating one on first use.
func LoadToken(blobs Blobs, name, prefix string) (*Token, error) {
	r, err := LoadRing(blobs, name, true)
	if err != nil {
		return nil, err
	}
	t := &Token{prefix: prefix}
	t.ring.Store(&r)
	return t, nil
}

// LoadRing reads the ring kept in blob name; a blob of an older version
// (one raw key) reads as a ring of that key, id 0. A missing blob is
// created with a new key when create is set, and an error otherwise.
func LoadRing(blobs Blobs, name string, create bool) (keyring.Ring, error) {
	b, ok, err := blobs.LoadBlob(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !ok {
		if !create {
			return nil, fmt.Errorf("%s: no key", name)
		}
		k, err := keyring.NewKey(time.Now())
		if err != nil {
			return nil, err
		}
		r := keyring.Ring{k}
		if err := blobs.SaveBlob(name, r.Encode()); err != nil {
			return nil, fmt.Errorf("saving %s: %w", name, err)
		}
		return r, nil
	}
	if keyring.IsRing(b) {
		r, err := keyring.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return r, nil
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("%s is damaged (%d bytes)", name, len(b))
	}
	return keyring.Ring{{Secret: b}}, nil
}

// GroupPrefix is the prefix of the tokens a data group mints: base (such
// as "t1.") for group 0, so that a cluster of one group mints what it
// always did, and base with "g" and the group before its dot ("t1g2.")
// for another; TokenGroup reads it back. The prefix is part of what a
// token's MAC covers.
func GroupPrefix(base string, group int) string {
	if group <= 0 {
		return base
	}
	return strings.TrimSuffix(base, ".") + "g" + strconv.Itoa(group) + "."
}

// TokenGroup is the data group that minted token s (GroupPrefix): 0 for
// a token without a group mark, or one that is not a token at all.
func TokenGroup(s string) int {
	head, _, ok := strings.Cut(s, ".")
	if !ok {
		return 0
	}
	i := strings.LastIndexByte(head, 'g')
	if i < 0 || i == len(head)-1 {
		return 0
	}
	g, err := strconv.Atoi(head[i+1:])
	if err != nil || g < 0 || strconv.Itoa(g) != head[i+1:] {
		return 0
	}
	return g
}

// SetRing replaces the token's ring (after a rotation).
func (t *Token) SetRing(r keyring.Ring) { t.ring.Store(&r) }

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
	copy(b[20:], t.mac((*t.ring.Load()).Newest().Secret, b[:20]))
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
	signed := false
	for _, k := range *t.ring.Load() {
		if hmac.Equal(b[20:], t.mac(k.Secret, b[:20])[:12]) {
			signed = true
			break
		}
	}
	if !signed {
		return 0, 0, ErrBadToken
	}
	if binary.BigEndian.Uint32(b[16:]) != TopicHash(topic) {
		return 0, 0, fmt.Errorf("%w: issued for another topic", ErrBadToken)
	}
	return int64(binary.BigEndian.Uint64(b[0:])), int64(binary.BigEndian.Uint64(b[8:])), nil
}

// mac is the HMAC-SHA256 of the prefix and body under secret.
func (t *Token) mac(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t.prefix))
	m.Write(body)
	return m.Sum(nil)
}
