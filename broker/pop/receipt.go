package pop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/keyring"
)

// Receipt handles are self-describing and tamper-evident: everything Ack
// and ChangeInvisibleDuration need to find the in-flight record is inside,
// authenticated with a key kept in the data dir, so no handle→message table
// is needed and handles stay valid across restarts.
//
//	"r1." + base64url(no padding) of:
//
//	 0        1       2         6          14       18      22          30         34
//	 +--------+-------+---------+----------+--------+-------+-----------+----------+
//	 |version | flags | queue   | offset   | epoch  | gen   | retrieved | invisible|
//	 |  u8    |  u8   | i32 BE  | i64 BE   | u32 BE | u32 BE| i64 ms BE | u32 ms BE|
//	 +--------+-------+---------+----------+--------+-------+-----------+----------+
//	 34         38         42            46                62
//	 | group    | topic    | incarnation | MAC (HMAC-SHA256 |
//	 | hash u32 | hash u32 | u32         |  truncated, 16 B)|
//
// The MAC covers bytes [0, 46). Handles are 83 characters plus the prefix.
const (
	handlePrefix  = "r1."
	handleVersion = 1
	handleBody    = 46
	handleMAC     = 16
	handleLen     = handleBody + handleMAC
	handleChars   = (handleLen*8 + 5) / 6 // base64url without padding
)

// strictRawURL decodes handles: base64url without padding, refusing
// non-zero trailing bits so that each handle has one spelling.
var strictRawURL = base64.RawURLEncoding.Strict()

// Handle flags.
const (
	// HandleFIFO marks a delivery from a FIFO (orderly) pop.
	HandleFIFO uint8 = 1 << iota
	// HandleAutoRenew marks a delivery renewed by the server.
	HandleAutoRenew
)

// Handle is a decoded receipt handle.
type Handle struct {
	Flags       uint8
	Queue       int32
	Offset      int64
	Epoch       uint32 // delivery number of this message for this group (1 = first)
	Gen         uint32 // version of the in-flight record this handle was issued for
	Retrieved   int64  // unix ms when this handle was issued
	Invisible   uint32 // ms of invisibility granted with it
	GroupHash   uint32
	TopicHash   uint32
	Incarnation uint32
}

// ErrBadHandle is wrapped by every decode failure.
var ErrBadHandle = errors.New("receipt handle")

// HandleCodec mints handles with one key and verifies them with that one
// or, for a handle of an earlier key of the ring (a rotation), that key.
type HandleCodec struct {
	key         []byte
	incarnation uint32
	// earlier are the ring's other keys by incarnation (NewRingCodec).
	earlier map[uint32][]byte
	// macs pools keyed HMAC states (*macState): Reset returns one to its
	// keyed start, so minting a handle does not redo the key schedule
	// (hmac.New was the largest single cost of a delivery in profiles).
	macs sync.Pool
}

// macState is a keyed HMAC with buffers for its input and its sum,
// pooled together so that computing a MAC allocates nothing (what is
// passed to the hash.Hash interface escapes to the heap).
type macState struct {
	h    hash.Hash
	body [handleBody]byte
	sum  [sha256.Size]byte
}

// NewHandleCodec returns a codec; key must be at least 16 bytes and
// incarnation identifies the store the handles belong to.
func NewHandleCodec(key []byte, incarnation uint32) (*HandleCodec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("receipt-handle key too short (%d bytes)", len(key))
	}
	c := &HandleCodec{key: append([]byte(nil), key...), incarnation: incarnation}
	c.macs.New = func() any { return &macState{h: hmac.New(sha256.New, c.key)} }
	return c, nil
}

// NewRingCodec returns a codec that mints with the ring's newest key
// (its id is the handles' incarnation) and verifies with any of its keys.
func NewRingCodec(r keyring.Ring) (*HandleCodec, error) {
	c, err := NewHandleCodec(r.Newest().Secret, r.Newest().ID)
	if err != nil {
		return nil, err
	}
	c.earlier = map[uint32][]byte{}
	for _, k := range r[1:] {
		c.earlier[k.ID] = k.Secret
	}
	return c, nil
}

// NameHash is the 32-bit hash handles carry for group and topic names.
func NameHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// mac writes the truncated MAC of body to out.
func (c *HandleCodec) mac(out *[handleMAC]byte, body *[handleBody]byte) {
	m := c.macs.Get().(*macState)
	m.body = *body
	m.h.Reset()
	m.h.Write(m.body[:])
	copy(out[:], m.h.Sum(m.sum[:0]))
	c.macs.Put(m)
}

// earlierMAC is mac with an earlier key of the ring, for a handle minted
// before a rotation: rare, so neither pooled nor kept from escaping (a
// body passed to a hash.Hash escapes; it is copied first so that
// Decode's buffers stay on its stack).
func earlierMAC(out *[handleMAC]byte, key []byte, body *[handleBody]byte) {
	m := hmac.New(sha256.New, key)
	m.Write(append([]byte(nil), body[:]...))
	copy(out[:], m.Sum(nil))
}

// Encode mints the handle string for h (its Incarnation is set to the
// codec's).
func (c *HandleCodec) Encode(h Handle) string {
	var b [handleLen]byte
	b[0] = handleVersion
	b[1] = h.Flags
	binary.BigEndian.PutUint32(b[2:], uint32(h.Queue))
	binary.BigEndian.PutUint64(b[6:], uint64(h.Offset))
	binary.BigEndian.PutUint32(b[14:], h.Epoch)
	binary.BigEndian.PutUint32(b[18:], h.Gen)
	binary.BigEndian.PutUint64(b[22:], uint64(h.Retrieved))
	binary.BigEndian.PutUint32(b[30:], h.Invisible)
	binary.BigEndian.PutUint32(b[34:], h.GroupHash)
	binary.BigEndian.PutUint32(b[38:], h.TopicHash)
	binary.BigEndian.PutUint32(b[42:], c.incarnation)
	c.mac((*[handleMAC]byte)(b[handleBody:]), (*[handleBody]byte)(b[:handleBody]))
	// Prefix and encoding in one buffer: the string is the only
	// allocation.
	var s [len(handlePrefix) + handleChars]byte
	copy(s[:], handlePrefix)
	base64.RawURLEncoding.Encode(s[len(handlePrefix):], b[:])
	return string(s[:])
}

// Decode parses and authenticates s. Every failure wraps ErrBadHandle and
// says what was wrong without echoing the handle.
func (c *HandleCodec) Decode(s string) (Handle, error) {
	if s == "" {
		return Handle{}, fmt.Errorf("%w is empty", ErrBadHandle)
	}
	if !strings.HasPrefix(s, handlePrefix) {
		return Handle{}, fmt.Errorf("%w was not issued by mqgate (unknown format)", ErrBadHandle)
	}
	enc := s[len(handlePrefix):]
	if base64.RawURLEncoding.DecodedLen(len(enc)) != handleLen {
		return Handle{}, fmt.Errorf("%w has the wrong length", ErrBadHandle)
	}
	// enc is handleChars long (checked above); copied to the stack, as a
	// []byte(enc) of this length would be allocated.
	var e [handleChars]byte
	copy(e[:], enc)
	var b [handleLen]byte
	if n, err := strictRawURL.Decode(b[:], e[:]); err != nil || n != handleLen {
		return Handle{}, fmt.Errorf("%w is not valid base64url", ErrBadHandle)
	}
	if b[0] != handleVersion {
		return Handle{}, fmt.Errorf("%w has unknown version %d", ErrBadHandle, b[0])
	}
	var sum [handleMAC]byte
	if inc := binary.BigEndian.Uint32(b[42:]); inc == c.incarnation {
		c.mac(&sum, (*[handleBody]byte)(b[:handleBody]))
	} else if key, ok := c.earlier[inc]; ok {
		earlierMAC(&sum, key, (*[handleBody]byte)(b[:handleBody]))
	} else {
		return Handle{}, fmt.Errorf("%w belongs to another store (data dir was replaced)", ErrBadHandle)
	}
	if !hmac.Equal(b[handleBody:], sum[:]) {
		return Handle{}, fmt.Errorf("%w failed authentication (forged or modified)", ErrBadHandle)
	}
	h := Handle{
		Flags:       b[1],
		Queue:       int32(binary.BigEndian.Uint32(b[2:])),
		Offset:      int64(binary.BigEndian.Uint64(b[6:])),
		Epoch:       binary.BigEndian.Uint32(b[14:]),
		Gen:         binary.BigEndian.Uint32(b[18:]),
		Retrieved:   int64(binary.BigEndian.Uint64(b[22:])),
		Invisible:   binary.BigEndian.Uint32(b[30:]),
		GroupHash:   binary.BigEndian.Uint32(b[34:]),
		TopicHash:   binary.BigEndian.Uint32(b[38:]),
		Incarnation: binary.BigEndian.Uint32(b[42:]),
	}
	return h, nil
}

// Deadline is the visibility deadline the handle was issued with.
func (h Handle) Deadline() time.Time {
	return time.UnixMilli(h.Retrieved + int64(h.Invisible))
}

// HandleQueue reads the queue a receipt handle names, without
// authenticating it (the data group holding the queue does when the
// handle reaches it): where a listener of a cluster of several data
// groups sends an ack. ok is false for what is not a receipt handle.
func HandleQueue(s string) (q int32, ok bool) {
	enc, ok := strings.CutPrefix(s, handlePrefix)
	if !ok || base64.RawURLEncoding.DecodedLen(len(enc)) != handleLen {
		return 0, false
	}
	var b [handleLen]byte
	if n, err := strictRawURL.Decode(b[:], []byte(enc)); err != nil || n != handleLen || b[0] != handleVersion {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b[2:])), true
}
