package sdk

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Version is this SDK's version, sent as x-mq-client-version and in the
// Telemetry user agent.
const Version = "0.1.0"

// DefaultRequestTimeout bounds a unary call whose ctx has no deadline
// (Ack, ChangeInvisibleDuration, heartbeats, termination).
const DefaultRequestTimeout = 3 * time.Second

// Option configures Dial.
type Option func(*config)

type config struct {
	tls            *tls.Config
	accessKey      string
	secretKey      string
	namespace      string
	clientID       string
	requestTimeout time.Duration
	dialOpts       []grpc.DialOption
}

// WithTLS connects with TLS without verifying the server's certificate
// (mqgate creates a self-signed one; the official clients do the same).
// Without it the SDK speaks plaintext HTTP/2; mqgate accepts both on one
// port.
func WithTLS() Option {
	return func(c *config) {
		c.tls = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}} //nolint:gosec // documented: mqgate's default certificate is self-signed
	}
}

// WithTLSConfig connects with TLS using cfg (for verified certificates).
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithCredentials signs every call with the MQv2-HMAC-SHA1 authorization
// header: the access key names the user, the secret key signs
// the x-mq-date-time header.
func WithCredentials(accessKey, secretKey string) Option {
	return func(c *config) { c.accessKey, c.secretKey = accessKey, secretKey }
}

// WithNamespace puts every topic and group in namespace ns.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithClientID sets the base of the client ids (default host@pid@random);
// each producer and consumer appends "@<n>".
func WithClientID(id string) Option { return func(c *config) { c.clientID = id } }

// WithRequestTimeout bounds calls whose ctx has no deadline (default 3 s).
// Sends have their own ProducerConfig.Timeout.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.requestTimeout = d } }

// WithDialOptions adds grpc dial options (interceptors, keepalive, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// Client is a connection to one mqgate (or RocketMQ proxy) endpoint. It
// is safe for concurrent use. Producers and consumers made from it share
// the connection; Close closes them all.
type Client struct {
	cfg      config
	endpoint string
	conn     *grpc.ClientConn
	ms       v2.MessagingServiceClient
	seq      atomic.Int64

	mu      sync.Mutex
	closed  bool
	members map[*member]struct{}
}

// Dial connects to endpoint ("host:port") and waits until the connection
// is ready or ctx ends. A server that cannot be reached is an error
// wrapping ErrUnavailable that says why (e.g. connection refused).
//
// endpoint may list several addresses separated by ";" (the official
// clients' syntax, e.g. every member of a cluster): the client connects
// to the first that answers, in order, and when the connection to it is
// lost it connects again the same way, so calls move on to the next
// member when one goes away. A call under way when its connection is
// lost fails as it would with one address (a send is retried when
// nothing reached the server).
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	c := &Client{endpoint: endpoint, members: map[*member]struct{}{}}
	c.cfg.requestTimeout = DefaultRequestTimeout
	for _, o := range opts {
		o(&c.cfg)
	}
	if c.cfg.clientID == "" {
		c.cfg.clientID = defaultClientID()
	}
	creds := insecure.NewCredentials()
	if c.cfg.tls != nil {
		creds = credentials.NewTLS(c.cfg.tls)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithStatsHandler(attemptStats{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}, c.cfg.dialOpts...)
	target, topts := DialTarget(endpoint)
	conn, err := grpc.NewClient(target, append(dopts, topts...)...)
	if err != nil {
		return nil, fmt.Errorf("sdk: dial %s: %w", endpoint, err)
	}
	c.conn, c.ms = conn, v2.NewMessagingServiceClient(conn)
	if err := c.waitReady(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// waitReady connects and waits for READY. On a failed connection attempt
// it asks once more without waiting, so the error carries grpc's reason.
func (c *Client) waitReady(ctx context.Context) error {
	c.conn.Connect()
	for {
		s := c.conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			_, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err == nil || status.Code(err) == codes.Unimplemented {
				return nil // reconnected meanwhile
			}
			return fmt.Errorf("sdk: cannot reach %s: %w: %s", c.endpoint, ErrUnavailable, status.Convert(err).Message())
		}
		if !c.conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("sdk: cannot reach %s: %w: not connected before the deadline (%v)", c.endpoint, ErrUnavailable, ctx.Err())
		}
	}
}

// Endpoint is the address the client dialed.
func (c *Client) Endpoint() string { return c.endpoint }

// Close closes every producer and consumer still open (NotifyClient-
// Termination, Telemetry streams ended, their goroutines stopped), then
// the connection. Everything shares ctx's deadline; what did not finish
// by then is listed in the returned *CloseError.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	members := make([]*member, 0, len(c.members))
	for m := range c.members {
		members = append(members, m)
	}
	c.mu.Unlock()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() { // closed in parallel: one deadline for all
			defer wg.Done()
			errs[i] = m.close(ctx)
		}()
	}
	wg.Wait()
	if err := c.conn.Close(); err != nil {
		errs = append(errs, fmt.Errorf("connection: %w", err))
	}
	return closeErr(errs)
}

// member is what every Producer and SimpleConsumer is to its Client: a
// session with the server, closed once, by its owner or by Client.Close.
type member struct {
	c    *Client
	sess *session

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
	// drain, when set, runs first in close (with close's ctx): a producer
	// sends what it holds.
	drain func(context.Context) error
}

// join starts a session (see startSession) and makes it a member of c.
func (c *Client) join(ctx context.Context, kind string, settings *v2.Settings, hb *v2.HeartbeatRequest, group *v2.Resource) (*member, error) {
	s, err := c.startSession(ctx, kind, settings, hb, group)
	if err != nil {
		return nil, err
	}
	m := &member{c: c, sess: s, closed: make(chan struct{})}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.members[m] = struct{}{}
	}
	c.mu.Unlock()
	if closed { // the client was closed meanwhile
		_ = s.shutdown(ctx)
		return nil, fmt.Errorf("sdk: %w", ErrClosed)
	}
	return m, nil
}

// close notifies the server, ends the Telemetry stream and waits for the
// session's goroutines until ctx ends; only the first call does so.
func (m *member) close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		close(m.closed)
		var derr error
		if m.drain != nil {
			derr = m.drain(ctx)
		}
		m.closeErr = closeErr([]error{derr, m.sess.shutdown(ctx)})
		m.c.mu.Lock()
		delete(m.c.members, m)
		m.c.mu.Unlock()
	})
	return m.closeErr
}

// isClosed reports whether close has begun.
func (m *member) isClosed() bool {
	select {
	case <-m.closed:
		return true
	default:
		return false
	}
}

func (c *Client) newClientID() string {
	return c.cfg.clientID + "@" + strconv.FormatInt(c.seq.Add(1), 10)
}

func (c *Client) resource(name string) *v2.Resource {
	return &v2.Resource{ResourceNamespace: c.cfg.namespace, Name: name}
}

// withTimeout gives ctx the request timeout when it has no deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.requestTimeout)
}

// outgoing returns ctx carrying the v2 request headers for
// clientID. Each call gets fresh values (request id, date, signature); a
// retry never accumulates duplicate headers.
func (c *Client) outgoing(ctx context.Context, clientID string) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	now := time.Now()
	date := now.Format(dateTimeLayout)
	md.Set("x-mq-client-id", clientID)
	md.Set("x-mq-language", "GO")
	md.Set("x-mq-protocol", "v2")
	md.Set("x-mq-client-version", Version)
	md.Set("x-mq-request-id", newRequestID())
	md.Set("x-mq-date-time", date)
	if c.cfg.namespace != "" {
		md.Set("x-mq-namespace", c.cfg.namespace)
	}
	if c.cfg.accessKey != "" || c.cfg.secretKey != "" {
		md.Set("authorization", authorization(c.cfg.accessKey, c.cfg.secretKey, date))
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// dateTimeLayout is x-mq-date-time's format: local time with a literal Z,
// as every client writes it.
const dateTimeLayout = "20060102T150405Z"

// authorization builds the MQv2-HMAC-SHA1 header.
func authorization(accessKey, secretKey, date string) string {
	mac := hmac.New(sha1.New, []byte(secretKey))
	mac.Write([]byte(date))
	return "MQv2-HMAC-SHA1 Credential=" + accessKey + ", SignedHeaders=x-mq-date-time, Signature=" + hex.EncodeToString(mac.Sum(nil))
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func defaultClientID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "@" + strconv.Itoa(os.Getpid()) + "@" + hex.EncodeToString(b[:])
}

// DialTarget is the grpc target, and the dial options it needs, that
// connect to endpoint as Dial does: one "host:port", or several
// separated by ";" taken in order (grpc's default balancer, pick_first,
// connects to the first that answers and starts again from the first
// when that connection is lost). For a grpc.ClientConn of one's own, e.g.
// to mqgate's admin API on the same port.
func DialTarget(endpoint string) (string, []grpc.DialOption) {
	addrs := splitEndpoint(endpoint)
	switch len(addrs) {
	case 0:
		return endpoint, nil
	case 1:
		return addrs[0], nil
	}
	r := manual.NewBuilderWithScheme("mqgate-members")
	st := resolver.State{}
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(st)
	return r.Scheme() + ":///members", []grpc.DialOption{grpc.WithResolvers(r)}
}

// splitEndpoint is the addresses of an endpoint list ("a;b;c"), blanks
// dropped.
func splitEndpoint(endpoint string) []string {
	var out []string
	for _, a := range strings.Split(endpoint, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// accessPoint describes endpoint (one address or a ";" list) for the
// Settings' access_point; the scheme is the first address's.
func accessPoint(endpoint string) *v2.Endpoints {
	ep := &v2.Endpoints{Scheme: v2.AddressScheme_DOMAIN_NAME}
	for i, a := range splitEndpoint(endpoint) {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, "8081"
		}
		p, _ := strconv.Atoi(port)
		if i == 0 {
			if ip := net.ParseIP(host); ip != nil {
				ep.Scheme = v2.AddressScheme_IPv4
				if ip.To4() == nil {
					ep.Scheme = v2.AddressScheme_IPv6
				}
			}
		}
		ep.Addresses = append(ep.Addresses, &v2.Address{Host: host, Port: int32(p)})
	}
	return ep
}

// grpcErr wraps a gRPC-level failure of op, marking UNAVAILABLE with
// ErrUnavailable.
func grpcErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Errorf("%s: %w: %s", op, ErrUnavailable, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w (%s)", op, context.DeadlineExceeded, st.Message())
	case codes.Canceled:
		return fmt.Errorf("%s: %w (%s)", op, context.Canceled, st.Message())
	}
	return fmt.Errorf("%s: %w", op, err)
}

func trimSpace(ss []string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Credentials returns gRPC per-call credentials that sign every call the
// way WithCredentials does (x-mq-date-time and the MQv2-HMAC-SHA1
// authorization header), for code that calls mqgate's services with its
// own grpc.ClientConn, such as the admin API:
//
//	grpc.NewClient(addr, grpc.WithPerRPCCredentials(sdk.Credentials(ak, sk)), ...)
//
// They work over plaintext connections too: use TLS where the network is
// not trusted, since a captured header can be replayed.
func Credentials(accessKey, secretKey string) credentials.PerRPCCredentials {
	return signer{accessKey, secretKey}
}

type signer struct{ accessKey, secretKey string }

func (s signer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	date := time.Now().Format(dateTimeLayout)
	return map[string]string{"x-mq-date-time": date, "authorization": authorization(s.accessKey, s.secretKey, date)}, nil
}

func (signer) RequireTransportSecurity() bool { return false }
