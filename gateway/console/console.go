package console

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/auth"
)

//go:embed assets
var assets embed.FS

// Broker is what the console reads and changes beyond the REST API
// (*broker.Broker is one).
type Broker interface {
	// MessageTotals are the messages stored and delivered since start.
	MessageTotals() (put, get int64)
	DeadLetters(ctx context.Context, group string, max int) (broker.DeadLetterPage, error)
	RedriveDeadLetters(ctx context.Context, group string, max int) (broker.RedriveResult, error)
}

// Options configure the console.
type Options struct {
	// API is the listener's REST handler (it serves /v1/...); nil answers
	// /console/v1/ with 503.
	API http.Handler
	// Broker serves /console/api/.
	Broker Broker
	// Auth verifies the console's Basic credentials; nil means auth is
	// off and the console is open.
	Auth   *auth.Authenticator
	Logger *slog.Logger
	// Now is the clock the signature dates come from (nil: time.Now).
	Now func() time.Time
}

// Prefix is where the console is mounted.
const Prefix = "/console"

// New returns the console's handler, to be mounted at Prefix and
// Prefix + "/".
func New(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &console{opts: o}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	files := http.StripPrefix(Prefix+"/", http.FileServerFS(static))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": the console's pages are read with GET")
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/console/v1/", c.api)
	mux.HandleFunc("GET /console/api/stats", c.stats)
	mux.HandleFunc("GET /console/api/groups/{group}/deadletters", c.deadLetters)
	mux.HandleFunc("POST /console/api/groups/{group}/deadletters/redrive", c.redrive)
	mux.HandleFunc("/console/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no console endpoint "+r.Method+" "+r.URL.Path)
	})
	return c.authenticate(changesFromPage(mux))
}

// changesFromPage refuses a change (not GET or HEAD) without changeHeader:
// a page of another site can make the browser POST here (a form), with
// the credentials it holds, but cannot add a header without the CORS
// preflight this server never grants.
func changesFromPage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get(changeHeader) != "1" {
			writeError(w, http.StatusForbidden, "console changes need the header "+changeHeader+": 1 (sent by the console's page)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type console struct {
	opts Options
}

// credsKey carries the caller's Basic credentials to the /v1/ hand-off.
type credsKey struct{}

type creds struct{ accessKey, secretKey string }

// changeHeader must be 1 on every console request that is not a GET or
// HEAD.
const changeHeader = "X-Mq-Console"

// authenticate lets a request through when auth is off, or when its Basic
// credentials are an admin user's.
func (c *console) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		a := c.opts.Auth
		if a == nil {
			next.ServeHTTP(w, r)
			return
		}
		ak, sk, ok := r.BasicAuth()
		if !ok {
			c.refuse(w, r, false, errors.New("authentication required: no Basic credentials"))
			return
		}
		date := c.opts.Now().UTC().Format(auth.DateTimeLayout)
		u, err := a.V2(auth.V2Sign(ak, sk, date), date)
		if err != nil {
			c.refuse(w, r, false, err)
			return
		}
		if err := u.Allow(auth.Access{Admin: true}); err != nil {
			c.refuse(w, r, true, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(auth.NewContext(r.Context(), u), credsKey{}, creds{ak, sk})))
	})
}

func (c *console) refuse(w http.ResponseWriter, r *http.Request, authorization bool, err error) {
	c.opts.Auth.Refused(r.Context(), c.opts.Logger, auth.Refusal{Listener: "grpc", Peer: r.RemoteAddr,
		Call: "console " + r.Method + " " + r.URL.Path, Authorization: authorization, Err: err})
	if authorization {
		writeError(w, http.StatusForbidden, "the console needs an admin user: "+err.Error())
		return
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="mqgate console", charset="UTF-8"`)
	writeError(w, http.StatusUnauthorized, "the console needs the access key and secret key of an admin user (HTTP Basic)")
}

// api hands /console/v1/... to the REST API as /v1/..., signed with the
// caller's credentials when auth is on.
func (c *console) api(w http.ResponseWriter, r *http.Request) {
	if c.opts.API == nil {
		writeError(w, http.StatusServiceUnavailable, "the REST API is not served on this listener")
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = strings.TrimPrefix(r.URL.Path, Prefix)
	if r.URL.RawPath != "" {
		r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, Prefix)
	}
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del(changeHeader)
	r2.Header.Del("Authorization")
	r2.Header.Del("X-Mq-Date-Time")
	if cr, ok := r.Context().Value(credsKey{}).(creds); ok {
		date := c.opts.Now().UTC().Format(auth.DateTimeLayout)
		r2.Header.Set("X-Mq-Date-Time", date)
		r2.Header.Set("Authorization", auth.V2Sign(cr.accessKey, cr.secretKey, date))
	}
	c.opts.API.ServeHTTP(w, r2)
}

// Stats is /console/api/stats: the broker's message totals at a time; the
// page derives rates from two samples.
type Stats struct {
	TimeMillis int64 `json:"timeMillis"`
	Put        int64 `json:"put"`
	Get        int64 `json:"get"`
}

func (c *console) stats(w http.ResponseWriter, _ *http.Request) {
	put, get := c.opts.Broker.MessageTotals()
	writeJSON(w, http.StatusOK, Stats{TimeMillis: c.opts.Now().UnixMilli(), Put: put, Get: get})
}

// DeadLetter is one dead letter as the console shows it.
type DeadLetter struct {
	MessageID      string            `json:"messageId"`
	OriginTopic    string            `json:"originTopic"`
	OriginID       string            `json:"originMessageId,omitempty"`
	Tag            string            `json:"tag,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	Properties     map[string]string `json:"properties,omitempty"`
	QueueOffset    int64             `json:"queueOffset"`
	StoreTime      time.Time         `json:"storeTime"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	// Body is the first previewBytes of the body (base64 in JSON).
	Body          []byte `json:"body"`
	BodySize      int    `json:"bodySize"`
	BodyTruncated bool   `json:"bodyTruncated"`
}

// DeadLetters is /console/api/groups/{group}/deadletters.
type DeadLetters struct {
	Topic    string       `json:"topic"`
	Pending  int64        `json:"pending"`
	Messages []DeadLetter `json:"messages"`
}

// previewBytes caps the body a dead-letter listing carries.
const previewBytes = 4 << 10

func (c *console) deadLetters(w http.ResponseWriter, r *http.Request) {
	max, ok := maxParam(w, r)
	if !ok {
		return
	}
	page, err := c.opts.Broker.DeadLetters(r.Context(), r.PathValue("group"), max)
	if err != nil {
		writeBrokerError(w, err)
		return
	}
	out := DeadLetters{Topic: page.Topic, Pending: page.Pending, Messages: make([]DeadLetter, 0, len(page.Messages))}
	for _, m := range page.Messages {
		out.Messages = append(out.Messages, deadLetter(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func deadLetter(m *model.Delivered) DeadLetter {
	body := m.Body
	d := DeadLetter{MessageID: m.ID, OriginTopic: m.DLQOriginTopic, OriginID: m.DLQOriginID, Tag: m.Tag, Keys: m.Keys,
		Properties: m.Properties, QueueOffset: m.QueueOffset, StoreTime: m.StoreTime, ReconsumeTimes: m.ReconsumeTimes,
		BodySize: len(body)}
	if len(body) > previewBytes {
		body, d.BodyTruncated = body[:previewBytes], true
	}
	d.Body = body
	return d
}

// Redrive is the answer of POST /console/api/groups/{group}/deadletters/redrive.
type Redrive struct {
	Redriven []Redriven `json:"redriven"`
	Pending  int64      `json:"pending"`
}

// Redriven is one dead letter sent back: its new message in its topic.
type Redriven struct {
	MessageID   string `json:"messageId"`
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
}

func (c *console) redrive(w http.ResponseWriter, r *http.Request) {
	max, ok := maxParam(w, r)
	if !ok {
		return
	}
	res, err := c.opts.Broker.RedriveDeadLetters(r.Context(), r.PathValue("group"), max)
	if err != nil && len(res.Redriven) == 0 {
		writeBrokerError(w, err)
		return
	}
	if err != nil {
		c.opts.Logger.Warn("console: redrive stopped early", "group", r.PathValue("group"), "redriven", len(res.Redriven), "err", err)
	}
	out := Redrive{Redriven: make([]Redriven, 0, len(res.Redriven)), Pending: res.Pending}
	for _, m := range res.Redriven {
		out.Redriven = append(out.Redriven, Redriven{MessageID: m.MessageID, Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset})
	}
	writeJSON(w, http.StatusOK, out)
}

// maxParam reads ?max= (absent: 0, the broker's default).
func maxParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("max")
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > broker.MaxDeadLetters {
		writeError(w, http.StatusBadRequest, "query parameter max="+strconv.Quote(s)+": want a number from 0 to "+strconv.Itoa(broker.MaxDeadLetters))
		return 0, false
	}
	return n, true
}
