package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"hash/maphash"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/mqerr"
)

// DateTimeLayout is the x-mq-date-time format every official client uses.
const DateTimeLayout = "20060102T150405Z"

// DefaultMaxSkew bounds how far x-mq-date-time may be from the server's
// clock. The v2 signature covers only that timestamp, so the window bounds
// how long a captured header can be replayed; it is generous because the
// Go client formats its local time with a literal Z, which is
// off by the client's UTC offset (up to 14 h). TLS is what keeps headers
// from being captured.
const DefaultMaxSkew = 25 * time.Hour

// Authenticator verifies callers against the current users. A nil
// *Authenticator means auth is disabled: it authenticates nobody and
// allows everything.
type Authenticator struct {
	users   atomic.Pointer[Users]
	now     func() time.Time
	maxSkew time.Duration
	// verified remembers recently verified v2 headers: a client signs only
	// the date, so every call it makes within a second carries the same
	// header, and checking it again would redo the HMAC (2 µs a call).
	verified [64]atomic.Pointer[verifiedV2]
	seed     maphash.Seed
	refused  refusals
}

// verifiedV2 is a header that verified against users at date t.
type verifiedV2 struct {
	authorization, dateTime string
	t                       time.Time
	users                   *Users
	user                    *User
}

// New returns an Authenticator over users.
func New(users *Users) *Authenticator {
	a := &Authenticator{now: time.Now, maxSkew: DefaultMaxSkew, seed: maphash.MakeSeed()}
	a.users.Store(users)
	return a
}

// SetUsers replaces the users (a reloaded file); calls in flight keep the
// user they were authenticated as.
func (a *Authenticator) SetUsers(u *Users) { a.users.Store(u) }

func unauthorized(format string, args ...any) error {
	return mqerr.Errorf(mqerr.KindUnauthorized, format, args...)
}

// V2 authenticates a v2 gRPC call from its `authorization` and
// `x-mq-date-time` metadata:
//
//	MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>
//
// where Signature is hex(HMAC-SHA1(secret, x-mq-date-time)).
func (a *Authenticator) V2(authorization, dateTime string) (*User, error) {
	users := a.users.Load()
	slot := &a.verified[maphash.String(a.seed, authorization)%uint64(len(a.verified))]
	if v := slot.Load(); v != nil && v.authorization == authorization && v.dateTime == dateTime && v.users == users {
		if d := a.now().Sub(v.t); d <= a.maxSkew && d >= -a.maxSkew {
			return v.user, nil
		}
	}
	u, t, err := a.verifyV2(users, authorization, dateTime)
	if err != nil {
		return nil, err
	}
	slot.Store(&verifiedV2{authorization: authorization, dateTime: dateTime, t: t, users: users, user: u})
	return u, nil
}

func (a *Authenticator) verifyV2(users *Users, authorization, dateTime string) (*User, time.Time, error) {
	if authorization == "" {
		return nil, time.Time{}, unauthorized("authentication required: no authorization header (configure the client's access key and secret key)")
	}
	algo, rest, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	if algo != "MQv2-HMAC-SHA1" {
		return nil, time.Time{}, unauthorized("authorization: unsupported algorithm %q (want MQv2-HMAC-SHA1)", algo)
	}
	var credential, signature, signed string
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch strings.TrimSpace(k) {
		case "Credential":
			credential = strings.TrimSpace(v)
		case "Signature":
			signature = strings.TrimSpace(v)
		case "SignedHeaders":
			signed = strings.TrimSpace(v)
		}
	}
	accessKey, _, _ := strings.Cut(credential, "/")
	if accessKey == "" {
		return nil, time.Time{}, unauthorized("authentication required: the authorization header names no access key")
	}
	if signed != "" && !strings.EqualFold(signed, "x-mq-date-time") {
		return nil, time.Time{}, unauthorized("authorization: SignedHeaders %q is not supported (want x-mq-date-time)", signed)
	}
	if dateTime == "" {
		return nil, time.Time{}, unauthorized("authorization: the signed x-mq-date-time header is missing")
	}
	t, err := time.Parse(DateTimeLayout, dateTime)
	if err != nil {
		return nil, time.Time{}, unauthorized("authorization: x-mq-date-time %q is not yyyyMMddTHHmmssZ", dateTime)
	}
	if d := a.now().Sub(t); d > a.maxSkew || d < -a.maxSkew {
		return nil, time.Time{}, unauthorized("authorization: x-mq-date-time %s is more than %s from the server's clock", dateTime, a.maxSkew)
	}
	u := users.get(accessKey)
	sig, err := hex.DecodeString(signature)
	if u == nil || err != nil || !hmac.Equal(sig, mac(u.secretKey, []byte(dateTime))) {
		// One answer for an unknown key and a wrong secret: no oracle for
		// which access keys exist.
		return nil, time.Time{}, unauthorized("authentication failed for access key %q: unknown access key or wrong signature", accessKey)
	}
	if u.Disabled {
		return nil, time.Time{}, unauthorized("access key %q is disabled", accessKey)
	}
	return u, t, nil
}

// V2Sign is the authorization value a v2 client sends for dateTime (in
// DateTimeLayout) with these credentials: the one definition V2 checks and
// in-process callers that sign on a user's behalf share.
func V2Sign(accessKey, secretKey, dateTime string) string {
	return "MQv2-HMAC-SHA1 Credential=" + accessKey + ", SignedHeaders=x-mq-date-time, Signature=" +
		hex.EncodeToString(mac([]byte(secretKey), []byte(dateTime)))
}

// Remoting field names of the classic ACL.
const (
	RemotingAccessKey     = "AccessKey"
	RemotingSignature     = "Signature"
	RemotingSecurityToken = "SecurityToken"
)

// Remoting authenticates a classic remoting request from its extension
// fields and body: Signature is base64(HMAC-SHA1(secret, the values of
// every other extension field in key order, then the body)).
func (a *Authenticator) Remoting(ext map[string]string, body []byte) (*User, error) {
	accessKey := ext[RemotingAccessKey]
	signature, ok := ext[RemotingSignature]
	if accessKey == "" || !ok {
		return nil, unauthorized("authentication required: the request carries no AccessKey and Signature (configure the client's credentials)")
	}
	u := a.users.Load().get(accessKey)
	sig, err := base64.StdEncoding.DecodeString(signature)
	if u == nil || err != nil || !hmac.Equal(sig, mac(u.secretKey, remotingContent(ext, body))) {
		return nil, unauthorized("authentication failed for access key %q: unknown access key or wrong signature", accessKey)
	}
	if u.Disabled {
		return nil, unauthorized("access key %q is disabled", accessKey)
	}
	return u, nil
}

// RemotingSign is what a classic client puts in the Signature field (ext
// already holding its AccessKey): the one definition clients and the
// server share.
func RemotingSign(ext map[string]string, body []byte, secretKey string) string {
	return base64.StdEncoding.EncodeToString(mac([]byte(secretKey), remotingContent(ext, body)))
}

// remotingContent is what a classic request's signature covers.
func remotingContent(ext map[string]string, body []byte) []byte {
	keys := make([]string, 0, len(ext))
	n := len(body)
	for k, v := range ext {
		if k != RemotingSignature {
			keys = append(keys, k)
			n += len(v)
		}
	}
	sort.Strings(keys)
	b := make([]byte, 0, n)
	for _, k := range keys {
		b = append(b, ext[k]...)
	}
	return append(b, body...)
}

func mac(key, data []byte) []byte {
	h := hmac.New(sha1.New, key)
	h.Write(data)
	return h.Sum(nil)
}

type ctxKey struct{}

// NewContext returns ctx carrying the authenticated user.
func NewContext(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, ctxKey{}, u)
}

// FromContext returns the user a listener authenticated, or nil.
func FromContext(ctx context.Context) *User {
	u, _ := ctx.Value(ctxKey{}).(*User)
	return u
}

// Access is what a call touches.
type Access struct {
	Admin     bool   // the admin API
	Publish   string // a topic sent to
	Subscribe string // a topic consumed
	Group     string // a consumer group consumed as
	// Route is a topic whose route is asked: allowed to whoever may
	// publish to it or consume it.
	Route string
	// Record is a message the request names only by its commit-log
	// offset (classic send-back, view by id): what is checked is the
	// topic of the message stored there, never a name the request
	// carries.
	Record *Record
}

// Record is what a commit-log offset holds, as the listener read it.
type Record struct {
	Offset int64
	// Topic is the topic of the message starting at Offset; "" when no
	// message starts there.
	Topic string
}

// Allow checks that the user in ctx may do everything in acc. With auth
// disabled (a nil Authenticator) everything is allowed; with it enabled, a
// context without a user is refused.
func (a *Authenticator) Allow(ctx context.Context, acc Access) error {
	if a == nil {
		return nil
	}
	u := FromContext(ctx)
	if u == nil {
		return unauthorized("authentication required")
	}
	return u.Allow(acc)
}

// Allow checks acc against u's permissions.
func (u *User) Allow(acc Access) error {
	if u.Admin {
		return nil
	}
	if acc.Admin {
		return unauthorized("access key %q may not use the admin API (not an admin user)", u.AccessKey)
	}
	if acc.Publish != "" && !matches(u.Publish, acc.Publish) {
		return unauthorized("access key %q may not publish to topic %q", u.AccessKey, acc.Publish)
	}
	if acc.Subscribe != "" && !u.canConsume(acc.Subscribe) {
		return unauthorized("access key %q may not consume topic %q", u.AccessKey, acc.Subscribe)
	}
	if acc.Group != "" && !matches(u.Groups, acc.Group) {
		return unauthorized("access key %q may not use consumer group %q", u.AccessKey, acc.Group)
	}
	if acc.Route != "" && !matches(u.Publish, acc.Route) && !u.canConsume(acc.Route) {
		return unauthorized("access key %q may neither publish to nor consume topic %q", u.AccessKey, acc.Route)
	}
	if r := acc.Record; r != nil && (r.Topic == "" || metadata.IsSystemTopic(r.Topic) || !u.canConsume(r.Topic)) {
		// One refusal for "nothing there", "a system record" and "a
		// topic it may not consume", naming no topic: walking offsets
		// must not map the log.
		return unauthorized("access key %q may not read commit-log offset %d: no message of a topic it may consume starts there", u.AccessKey, r.Offset)
	}
	return nil
}

// canConsume: a group's retry and dead-letter topics belong to the group,
// so whoever may use the group may consume them.
func (u *User) canConsume(topic string) bool {
	for _, p := range []string{metadata.RetryPrefix, metadata.DLQPrefix} {
		if g, ok := strings.CutPrefix(topic, p); ok {
			return matches(u.Groups, g)
		}
	}
	return matches(u.Subscribe, topic)
}
