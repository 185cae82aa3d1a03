package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Session timing.
const (
	heartbeatInterval = 10 * time.Second
	maxReconnectDelay = 30 * time.Second
)

// session is one client of the server (a producer or a consumer): its
// Telemetry stream, settings and heartbeats. Its goroutines: run (owns
// the stream, reconnects, heartbeats) and, per open stream, one reader.
// Both end before done is closed.
type session struct {
	c        *Client
	kind     string // "producer" or "consumer", for errors
	clientID string
	settings *v2.Settings
	hb       *v2.HeartbeatRequest
	group    *v2.Resource // for NotifyClientTermination

	ctx     context.Context // ends every call and stream of the session
	cancel  context.CancelFunc
	closing context.Context // ends when Close begins
	close   context.CancelFunc
	done    chan struct{}

	firstOnce sync.Once
	first     chan error

	mu      sync.Mutex
	applied *v2.Settings // the server's last Settings reply
	sendMu  sync.Mutex   // serialises writes (and CloseSend) on the stream
}

// startSession opens the Telemetry stream, sends settings and waits for
// the server's Settings reply until ctx ends.
func (c *Client) startSession(ctx context.Context, kind string, settings *v2.Settings, hb *v2.HeartbeatRequest, group *v2.Resource) (*session, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("sdk: new %s: client %w", kind, ErrClosed)
	}
	s := &session{c: c, kind: kind, clientID: c.newClientID(), settings: settings, hb: hb, group: group,
		done: make(chan struct{}), first: make(chan error, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.closing, s.close = context.WithCancel(s.ctx)
	go s.run()
	select {
	case err := <-s.first:
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("sdk: %s Telemetry handshake with %s: %w", kind, c.endpoint, err)
		}
		return s, nil
	case <-ctx.Done():
		s.stop()
		return nil, fmt.Errorf("sdk: %s Telemetry handshake with %s: no Settings reply before the deadline: %w", kind, c.endpoint, ctx.Err())
	}
}

func (s *session) reportFirst(err error) { s.firstOnce.Do(func() { s.first <- err }) }

// stop ends the session at once and waits for its goroutines.
func (s *session) stop() {
	s.close()
	s.cancel()
	<-s.done
}

// serverSettings returns the server's last Settings reply.
func (s *session) serverSettings() *v2.Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *session) run() {
	defer close(s.done)
	delay := time.Second
	for {
		answered, err := s.stream()
		if s.closing.Err() != nil {
			return
		}
		s.reportFirst(err) // only the first stream's outcome matters to start
		if answered {
			delay = time.Second
		}
		t := time.NewTimer(delay)
		select {
		case <-s.closing.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, maxReconnectDelay)
	}
}

// stream runs one Telemetry stream until it ends or Close begins. It
// reports whether the server answered the settings.
func (s *session) stream() (answered bool, _ error) {
	sctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	st, err := s.c.ms.Telemetry(s.c.outgoing(sctx, s.clientID))
	if err != nil {
		return false, grpcErr("Telemetry", err)
	}
	if err := s.send(st, &v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: s.settings}}); err != nil {
		return false, s.recvErr(st, err)
	}
	ended := make(chan error, 1)
	var got atomic.Bool
	go func() { ended <- s.read(st, func() { got.Store(true) }) }()
	tick := time.NewTicker(heartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-ended:
			return got.Load(), err
		case <-tick.C:
			s.heartbeat()
		case <-s.closing.Done():
			s.sendMu.Lock()
			_ = st.CloseSend()
			s.sendMu.Unlock()
			// The server completes its side on our half-close; Close
			// cancels s.ctx if it does not before the deadline.
			<-ended
			return got.Load(), nil
		}
	}
}

// recvErr turns a failed Send into the stream's real error (grpc reports
// io.EOF from Send and the status from Recv).
func (s *session) recvErr(st v2.MessagingService_TelemetryClient, err error) error {
	if errors.Is(err, io.EOF) {
		cmd, rerr := st.Recv()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return grpcErr("Telemetry", rerr)
		}
		// A server that refuses the stream (UNAUTHORIZED, CLIENT_ID_REQUIRED)
		// answers one status-only command and ends it.
		if serr := statusErr("Telemetry", cmd.GetStatus()); rerr == nil && cmd.GetStatus() != nil && serr != nil {
			return serr
		}
		return errors.New("telemetry: the server ended the stream")
	}
	return grpcErr("Telemetry", err)
}

func (s *session) send(st v2.MessagingService_TelemetryClient, cmd *v2.TelemetryCommand) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return st.Send(cmd)
}

// read handles server commands until the stream ends.
func (s *session) read(st v2.MessagingService_TelemetryClient, answered func()) error {
	for {
		cmd, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("telemetry: the server ended the stream")
		}
		if err != nil {
			return grpcErr("Telemetry", err)
		}
		switch c := cmd.GetCommand().(type) {
		case *v2.TelemetryCommand_Settings:
			if err := statusErr("Telemetry", cmd.GetStatus()); err != nil && cmd.Status != nil {
				s.reportFirst(err)
				continue
			}
			s.mu.Lock()
			s.applied = c.Settings
			s.mu.Unlock()
			answered()
			s.reportFirst(nil)
		case *v2.TelemetryCommand_PrintThreadStackTraceCommand:
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			trace := string(buf)
			_ = s.send(st, &v2.TelemetryCommand{Status: &v2.Status{Code: v2.Code_OK, Message: "OK"},
				Command: &v2.TelemetryCommand_ThreadStackTrace{ThreadStackTrace: &v2.ThreadStackTrace{Nonce: c.PrintThreadStackTraceCommand.GetNonce(), ThreadStackTrace: &trace}}})
		case *v2.TelemetryCommand_VerifyMessageCommand:
			_ = s.send(st, &v2.TelemetryCommand{Status: &v2.Status{Code: v2.Code_NOT_IMPLEMENTED, Message: "the mqgate Go SDK does not verify messages"},
				Command: &v2.TelemetryCommand_VerifyMessageResult{VerifyMessageResult: &v2.VerifyMessageResult{Nonce: c.VerifyMessageCommand.GetNonce()}}})
		default:
			// RecoverOrphanedTransactionCommand: this SDK sends no
			// transactional messages. ReconnectEndpointsCommand: the
			// stream is reopened whenever the server ends it. Status-only
			// commands (e.g. UNAUTHORIZED) fail the handshake.
			if cmd.GetCommand() == nil {
				if err := statusErr("Telemetry", cmd.GetStatus()); err != nil {
					s.reportFirst(err)
				}
			}
		}
	}
}

func (s *session) heartbeat() {
	ctx, cancel := context.WithTimeout(s.closing, s.c.cfg.requestTimeout)
	defer cancel()
	_, _ = s.c.ms.Heartbeat(s.c.outgoing(ctx, s.clientID), s.hb)
}

// shutdown tells the server the client is gone, ends the stream and
// waits for the session's goroutines, all within ctx.
func (s *session) shutdown(ctx context.Context) error {
	var problems []error
	nctx, cancel := s.c.withTimeout(ctx)
	resp, err := s.c.ms.NotifyClientTermination(s.c.outgoing(nctx, s.clientID), &v2.NotifyClientTerminationRequest{Group: s.group})
	cancel()
	if err == nil {
		err = statusErr("NotifyClientTermination", resp.GetStatus())
	}
	if err != nil {
		problems = append(problems, fmt.Errorf("%s %s: NotifyClientTermination: %w", s.kind, s.clientID, grpcErr("NotifyClientTermination", err)))
	}
	s.close()
	select {
	case <-s.done:
	case <-ctx.Done():
		problems = append(problems, fmt.Errorf("%s %s: Telemetry stream not closed by the server before the deadline; cancelled it: %w", s.kind, s.clientID, ctx.Err()))
	}
	s.cancel()
	<-s.done // prompt once cancelled: every call and stream uses s.ctx
	return closeErr(problems)
}

func userAgent() *v2.UA {
	host, _ := os.Hostname()
	return &v2.UA{Language: v2.Language_GOLANG, Version: Version, Platform: runtime.GOOS + "/" + runtime.GOARCH, Hostname: host}
}
