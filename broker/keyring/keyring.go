package keyring

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Key is one signing key.
type Key struct {
	// ID names the key in what it signs, where the format has room for
	// it (a receipt handle's incarnation).
	ID uint32
	// Created is when the key was made (unix ms).
	Created int64
	Secret  []byte
}

// Ring is a set of keys, newest first.
type Ring []Key

const (
	// SecretSize is the size of the secrets New makes.
	SecretSize = 32
	// MaxKeys bounds a ring.
	MaxKeys   = 8
	minSecret = 16
	version   = 1
)

var magic = []byte("MQKR")

// ErrBadRing: bytes that are not a ring.
var ErrBadRing = errors.New("keyring: malformed ring")

// NewKey makes a key with a random secret, created at now; its id is
// random too, never 0.
func NewKey(now time.Time) (Key, error) {
	k := Key{Created: now.UnixMilli(), Secret: make([]byte, SecretSize)}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Key{}, err
	}
	if _, err := rand.Read(k.Secret); err != nil {
		return Key{}, err
	}
	k.ID = binary.BigEndian.Uint32(id[:]) | 1
	return k, nil
}

// IsRing reports whether b is an encoded ring (rather than the single
// raw key an older version kept).
func IsRing(b []byte) bool { return bytes.HasPrefix(b, magic) }

// Encode returns the ring's blob.
func (r Ring) Encode() []byte {
	b := append([]byte(nil), magic...)
	b = append(b, version, byte(len(r)))
	for _, k := range r {
		b = binary.BigEndian.AppendUint32(b, k.ID)
		b = binary.BigEndian.AppendUint64(b, uint64(k.Created))
		b = append(b, byte(len(k.Secret)))
		b = append(b, k.Secret...)
	}
	return b
}

// Decode reads a ring's blob.
func Decode(b []byte) (Ring, error) {
	if !IsRing(b) || len(b) < len(magic)+2 {
		return nil, fmt.Errorf("%w: no header", ErrBadRing)
	}
	if b[4] != version {
		return nil, fmt.Errorf("%w: version %d", ErrBadRing, b[4])
	}
	n := int(b[5])
	if n == 0 || n > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys", ErrBadRing, n)
	}
	p := 6
	r := make(Ring, 0, n)
	for i := range n {
		if len(b)-p < 13 {
			return nil, fmt.Errorf("%w: key %d cut short", ErrBadRing, i)
		}
		k := Key{ID: binary.BigEndian.Uint32(b[p:]), Created: int64(binary.BigEndian.Uint64(b[p+4:]))}
		l := int(b[p+12])
		p += 13
		if l < minSecret || len(b)-p < l {
			return nil, fmt.Errorf("%w: key %d of %d bytes", ErrBadRing, i, l)
		}
		k.Secret = append([]byte(nil), b[p:p+l]...)
		p += l
		r = append(r, k)
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadRing, len(b)-p)
	}
	return r, nil
}

// Newest is the key that signs.
func (r Ring) Newest() Key { return r[0] }

// ByID is the key named id.
func (r Ring) ByID(id uint32) (Key, bool) {
	for _, k := range r {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// Rotated is r with key first, keeping keys created after dropBefore
// (unix ms) and at most MaxKeys in all.
func (r Ring) Rotated(key Key, dropBefore int64) Ring {
	out := Ring{key}
	for _, k := range r {
		if len(out) == MaxKeys {
			break
		}
		if k.Created >= dropBefore && k.ID != key.ID {
			out = append(out, k)
		}
	}
	return out
}
