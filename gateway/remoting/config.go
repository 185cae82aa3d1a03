package remoting

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/clock"
)

// Config configures the listener. The zero value of each field means its
// default.
type Config struct {
	// Auth, when set, requires every request to carry a valid ACL
	// signature (AccessKey, Signature) and checks what it touches; nil
	// leaves the listener open.
	Auth *auth.Authenticator
	// SendWindow, with Auth, refuses a signed send (or reply) whose
	// bornTimestamp, which the signature covers, is further than this
	// from Clock: a captured signed send then replays only within it. No
	// other request carries a signed time. 0: no bound, as upstream.
	SendWindow time.Duration
	// AdvertiseHost is the host routes, cluster info and message ids name
	// (with the listener's own port). Empty: the address the client
	// dialed (the connection's local address).
	AdvertiseHost string
	// ClusterName and BrokerName of the one logical broker (DefaultCluster,
	// broker-a).
	ClusterName, BrokerName string
	// Members, when set (a replica group's member), lists the members a
	// topic's route names besides the one the client asked, each as a
	// broker of its own that producers may send through (see routeInfo).
	Members func(ctx context.Context) []RouteMember
	// MaxFrame refuses larger frames (16 MiB, upstream's limit).
	MaxFrame int
	// MaxInFlight bounds concurrent requests per connection (256).
	MaxInFlight int
	// MaxBytesInFlight bounds the request bytes held by all connections at
	// once (256 MiB); a reader waits for room before taking a frame.
	MaxBytesInFlight int64
	// MaxConnBytesInFlight bounds what one connection's frames hold of it
	// (MaxBytesInFlight/8, at least MaxFrame).
	MaxConnBytesInFlight int64
	// UnauthBytesInFlight is the separate budget of connections that have
	// not yet had a request authenticated, with Auth set
	// (MaxBytesInFlight/8, at least MaxFrame): unsigned traffic never
	// holds the budget of authenticated connections. One client address
	// may hold at most half of it (at least MaxFrame).
	UnauthBytesInFlight int64
	// UnauthSmallFrame and UnauthSmallBytes: frames of at most
	// UnauthSmallFrame bytes (64 KiB) on such connections are read in a
	// lane of their own of UnauthSmallBytes (4 MiB), so that a new
	// client's first requests (a route, a heartbeat, a small send) never
	// wait behind large unsigned frames.
	UnauthSmallFrame int
	UnauthSmallBytes int64
	// FrameTimeout bounds how long a frame's bytes may take to arrive once
	// its length was read, not counting waits for budget (10 s); a frame
	// that takes longer closes its connection.
	FrameTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long
	// (120 s; live clients heartbeat every 30 s).
	IdleTimeout time.Duration
	// FirstFrameTimeout closes a new connection whose first frame (or a
	// relay's greeting) has not begun to arrive within it (10 s): clients
	// connect to send a request.
	FirstFrameTimeout time.Duration
	// WriteTimeout bounds writing one frame (10 s).
	WriteTimeout time.Duration
	// MaxPullWait caps a long-polling pull (25 s: clients time out at 30).
	MaxPullWait time.Duration
	// ClientExpiry drops a client not heard from for this long (120 s).
	ClientExpiry time.Duration
	// RequestTimeout bounds one non-polling request (30 s).
	RequestTimeout time.Duration
	Clock          clock.Clock
	Logger         *slog.Logger
	// Pid goes into minted message ids (os.Getpid()).
	Pid int
}

func (c Config) withDefaults() Config {
	if c.ClusterName == "" {
		c.ClusterName = "DefaultCluster"
	}
	if c.BrokerName == "" {
		c.BrokerName = "broker-a"
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = codec.DefaultMaxFrame
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.MaxBytesInFlight <= 0 {
		c.MaxBytesInFlight = 256 << 20
	}
	if c.MaxConnBytesInFlight <= 0 {
		c.MaxConnBytesInFlight = max(c.MaxBytesInFlight/8, int64(c.MaxFrame))
	}
	if c.UnauthBytesInFlight <= 0 {
		c.UnauthBytesInFlight = max(c.MaxBytesInFlight/8, int64(c.MaxFrame))
	}
	if c.UnauthSmallFrame <= 0 {
		c.UnauthSmallFrame = 64 << 10
	}
	if c.UnauthSmallBytes <= 0 {
		c.UnauthSmallBytes = max(4<<20, int64(c.UnauthSmallFrame))
	}
	if c.FirstFrameTimeout <= 0 {
		c.FirstFrameTimeout = 10 * time.Second
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxPullWait <= 0 {
		c.MaxPullWait = 25 * time.Second
	}
	if c.ClientExpiry <= 0 {
		c.ClientExpiry = 120 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.MaxFrame > 0 && c.MaxFrame < 1<<10 {
		return errors.New("remoting: max frame must be at least 1 KiB")
	}
	return nil
}
