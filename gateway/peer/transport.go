package peer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// The peer service is mqgate.cluster.v1.PeerService
// (proto/mqgate/cluster/v1/peer.proto, generated into gen/): one Raft
// stream per (sender, receiver) pair carrying batches of raft messages
// of any group, and the control calls of server.go. Every call is
// admitted before its body is read (auth.go).
const (
	raftMethod     = clusterv1.PeerService_Raft_FullMethodName
	infoMethod     = clusterv1.PeerService_Info_FullMethodName
	statusMethod   = clusterv1.PeerService_Status_FullMethodName
	transferMethod = clusterv1.PeerService_TransferLeadership_FullMethodName
	copyMethod     = clusterv1.PeerService_CopyStore_FullMethodName
	addMethod      = clusterv1.PeerService_AddMember_FullMethodName
	removeMethod   = clusterv1.PeerService_RemoveMember_FullMethodName
	proposeMethod  = clusterv1.PeerService_Propose_FullMethodName
	readIdxMethod  = clusterv1.PeerService_ReadIndex_FullMethodName
	checkTxMethod  = clusterv1.PeerService_CheckTransaction_FullMethodName
	hostMethod     = clusterv1.PeerService_HostGroup_FullMethodName
	mdClusterID    = "mqgate-cluster-id"
	mdToken        = "mqgate-peer-token"
	mdFromNode     = "mqgate-from-node"
	peerQueueLen   = 4096
	// maxSendBatch bounds the raft messages a sender puts in one
	// RaftRequest.
	maxSendBatch = 64
	// peerHandshake bounds a peer connection's handshake by default
	// (Config.HandshakeTimeout).
	peerHandshake = 10 * time.Second
)

// serviceDesc is the generated service's, with every control call's
// request bounded (decodeControl) before it is decoded.
var serviceDesc = func() grpc.ServiceDesc {
	d := clusterv1.PeerService_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i, m := range d.Methods {
		h := m.Handler
		limit := maxControlRequest
		switch "/" + d.ServiceName + "/" + m.MethodName {
		case proposeMethod:
			limit = maxProposeRequest
		case checkTxMethod:
			limit = maxCheckRequest
		}
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			t := srv.(*peerServer).t
			return h(srv, ctx, func(v any) error { return t.decodeControl(dec, v.(proto.Message), limit) }, icpt)
		}
	}
	d.Streams = slices.Clone(d.Streams)
	for i, st := range d.Streams {
		if st.ClientStreams {
			continue // Raft: messages as large as an entry, bounded by the server's limit
		}
		h := st.Handler
		d.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, boundedStream{ServerStream: stream, t: srv.(*peerServer).t})
		}
	}
	return d
}()

// boundedStream receives a server stream's one request through
// decodeControl.
type boundedStream struct {
	grpc.ServerStream
	t *transport
}

func (s boundedStream) RecvMsg(m any) error {
	return s.t.decodeControl(s.ServerStream.RecvMsg, m.(proto.Message), maxControlRequest)
}

// services is what the raft streams and the control calls of one group
// answer from (the group's Node). The member-wide calls (Info, who may
// send) are answered by group 0's.
type services interface {
	info() *clusterv1.InfoResponse
	// LeaderView is the group's leader and term as the node knows them.
	LeaderView() (lead, term uint64)
	// deliver takes a raft message of the group; reportUnreachable says
	// a member could not be sent to.
	deliver(m *raftpb.Message)
	reportUnreachable(id uint64)
	Status(ctx context.Context) (Status, error)
	TransferLeadership(ctx context.Context, to uint64) error
	AddMember(ctx context.Context, id uint64, addr string) error
	RemoveMember(ctx context.Context, id uint64) error
	Members() Membership
	// snapshotSent reports whether a snapshot message went out to member
	// id (raft waits for that report before it sends that member more).
	snapshotSent(id uint64, ok bool)
	copyStore(ctx context.Context, least uint64, send func([]byte) error) error
	// isRemoved reports whether member id was removed from the group
	// (its messages are refused); removedByPeers is called when another
	// member refused this one's for that reason.
	isRemoved(id uint64) bool
	removedByPeers(by uint64)
	// knows reports whether id is a member this one knows of (or one
	// removed from the group): raft streams from others are refused.
	knows(id uint64) bool
	// removed reports whether this member was removed from the group
	// (its raft loop stopped for that).
	removed() bool
	// proposeForwarded and readIndexForwarded answer Propose and
	// ReadIndex.
	proposeForwarded(ctx context.Context, change []byte) (uint64, error)
	readIndexForwarded(ctx context.Context) (uint64, error)
	// checkTransactionForwarded answers CheckTransaction (a member-wide
	// call).
	checkTransactionForwarded(ctx context.Context, topic, txID string, msg []byte) (clientID string, sent bool, err error)
}

// transport sends the raft messages of every group this member hosts to
// the peers and hands received ones to their group's node. Each peer has
// one sender goroutine owning its connection and a bounded queue: when
// the queue is full, messages are dropped (raft retransmits).
type transport struct {
	cfg    Config
	logger *slog.Logger
	// groups are the groups' nodes by group id (nil: not hosted), set
	// before the server starts and replaced whole when the member starts
	// hosting a group (hosting): groups[0] answers the member-wide calls.
	groups  atomic.Pointer[[]services]
	srv     *grpc.Server
	lis     net.Listener
	wg      sync.WaitGroup
	stop    chan struct{}
	refused refusals

	mu    sync.RWMutex
	peers map[uint64]*peerSender // setPeers
	// hostMu serialises the replacements of groups.
	hostMu sync.Mutex
}

type peerSender struct {
	id   uint64
	addr string
	// conn carries the raft stream and the unary calls to the member
	// (nil when its address does not parse).
	conn *grpc.ClientConn
	q    chan outMsg
	stop chan struct{} // closed when the member is no longer dialled
}

// outMsg is a raft message of a group, queued for its receiver.
type outMsg struct {
	group uint64
	m     *raftpb.Message
}

// svc is the node of group g, nil when this member does not host it, or
// no longer does: it was removed from the data group (a member removed
// from group 0 is out of the cluster, and its node goes on answering
// that).
func (t *transport) svc(g uint64) services {
	if gs := *t.groups.Load(); g < uint64(len(gs)) {
		if s := gs[g]; s != nil && (g == 0 || !s.removed()) {
			return s
		}
	}
	return nil
}

// left reports whether this member hosted data group g and was removed
// from it.
func (t *transport) left(g uint64) bool {
	gs := *t.groups.Load()
	return g > 0 && g < uint64(len(gs)) && gs[g] != nil && gs[g].removed()
}

// member is the node answering the member-wide calls (group 0's).
func (t *transport) member() services { return (*t.groups.Load())[0] }

// hosting has the transport hand group g's messages and calls to svc,
// a node started for it while the member runs.
func (t *transport) hosting(g uint64, svc services) {
	t.hostMu.Lock()
	defer t.hostMu.Unlock()
	gs := slices.Clone(*t.groups.Load())
	gs[g] = svc
	t.groups.Store(&gs)
}

// groupCount is how many groups the member's cluster has.
func (t *transport) groupCount() int { return len(*t.groups.Load()) }

// unreachable tells every group that member id could not be sent to.
func (t *transport) unreachable(id uint64) {
	for g := range t.groupCount() {
		if s := t.svc(uint64(g)); s != nil {
			s.reportUnreachable(id)
		}
	}
}

// hostedNote says which of the cluster's groups this member hosts, for
// errors.
func (t *transport) hostedNote() string {
	var ids []string
	for g := range t.groupCount() {
		if t.svc(uint64(g)) != nil {
			ids = append(ids, strconv.Itoa(g))
		}
	}
	if len(ids) == t.groupCount() {
		return fmt.Sprintf("it hosts all %d", t.groupCount())
	}
	return fmt.Sprintf("of %d it hosts %s", t.groupCount(), strings.Join(ids, ", "))
}

// leaders is the leader and voters of every group this member hosts as
// it knows them (Info).
func (t *transport) leaders() []*clusterv1.GroupLeader {
	var out []*clusterv1.GroupLeader
	for g := range t.groupCount() {
		if svc := t.svc(uint64(g)); svc != nil {
			lead, term := svc.LeaderView()
			out = append(out, &clusterv1.GroupLeader{Group: uint64(g), Leader: lead, Term: term, Voters: svc.Members().Voters})
		}
	}
	return out
}

func newTransport(cfg Config, logger *slog.Logger, groups []services) (*transport, error) {
	if cfg.TLS != nil {
		if err := cfg.TLS.CheckServer(); err != nil {
			return nil, err
		}
	}
	lis := cfg.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.Peers[cfg.NodeID]); err != nil {
			return nil, fmt.Errorf("peer: listen: %w", err)
		}
	}
	t := &transport{cfg: cfg, logger: logger, lis: lis, peers: map[uint64]*peerSender{}, stop: make(chan struct{})}
	t.groups.Store(&groups)
	// A connection must finish its (TLS) handshake and HTTP/2 preface
	// within HandshakeTimeout, or it is closed.
	t.srv = grpc.NewServer(append(cfg.TLS.serverOption(), grpc.ConnectionTimeout(cmp.Or(cfg.HandshakeTimeout, peerHandshake)), grpc.InTapHandle(t.admit),
		grpc.ForceServerCodecV2(newRawCodec()), grpc.MaxRecvMsgSize(maxRaftMessage),
		grpc.StaticStreamWindowSize(serverStreamWindow), grpc.StaticConnWindowSize(serverConnWindow))...)
	t.srv.RegisterService(&serviceDesc, &peerServer{t: t})
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if err := t.srv.Serve(lis); err != nil {
			logger.Warn("peer: transport stopped serving", "err", err)
		}
	}()
	return t, nil
}

// The connections between members have static HTTP/2 flow-control
// windows: gRPC's bandwidth-delay estimation, on with its default
// windows, pings the sender whenever data arrives with no ping out, which
// on a low-latency link is nearly every message a stream receives (a raft
// append, its answer): a PING and its acknowledgement, two more writes
// and two more reads each.
//
// What a member takes in (serverStreamWindow, serverConnWindow) stays
// small: it is all a caller that fails authentication can make it read
// of a request before the call is refused (the headers are checked
// first), and an append of raft's largest size (1 MiB) still goes in four
// windows. What it dials with (dialStreamWindow, dialConnWindow) bounds
// what it takes in as a caller: copies of a store, and the answers of
// requests it forwards.
const (
	serverStreamWindow = 256 << 10
	serverConnWindow   = 1 << 20
	dialStreamWindow   = 4 << 20
	dialConnWindow     = 16 << 20
)

// DialWindows are the dial options of a connection to another member
// (dialStreamWindow, dialConnWindow).
func DialWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(dialStreamWindow), grpc.WithStaticConnWindowSize(dialConnWindow)}
}

// setPeers makes the transport dial exactly the members in addrs (id to
// peer address): a sender starts for each new member or new address,
// and stops for each member no longer named.
func (t *transport) setPeers(addrs map[uint64]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop:
		return
	default:
	}
	for id, p := range t.peers {
		if addrs[id] != p.addr {
			close(p.stop)
			delete(t.peers, id)
		}
	}
	for id, addr := range addrs {
		if _, ok := t.peers[id]; ok || id == t.cfg.NodeID {
			continue
		}
		p := &peerSender{id: id, addr: addr, q: make(chan outMsg, peerQueueLen), stop: make(chan struct{})}
		t.peers[id] = p
		conn, err := grpc.NewClient(addr, append(DialWindows(), t.cfg.TLS.dialOption())...)
		if err != nil {
			t.logger.Error("peer: bad peer address", "member", id, "addr", addr, "err", err)
			continue
		}
		p.conn = conn
		t.wg.Add(1)
		go t.runSender(p)
	}
}

// serveRaft takes the raft messages of one sender's stream (admitted:
// auth.go) and hands each to its group.
func (t *transport) serveRaft(stream clusterv1.PeerService_RaftServer) error {
	from := streamSender(stream.Context())
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, rm := range req.GetMessages() {
			svc := t.svc(rm.GetGroup())
			if svc == nil && t.left(rm.GetGroup()) {
				continue // a late message of a group this member was removed from
			}
			if svc == nil {
				return status.Errorf(codes.InvalidArgument, "peer: a message for group %d, which this member does not host "+
					"(%s: were the members started with different --data-groups?)", rm.GetGroup(), t.hostedNote())
			}
			m := new(raftpb.Message)
			if err := proto.Unmarshal(rm.GetMessage(), m); err != nil {
				return status.Errorf(codes.InvalidArgument, "peer: a raft message that does not decode: %v", err)
			}
			if m.GetFrom() != from {
				t.refused.add(RefusedMember)
				return status.Errorf(codes.PermissionDenied, "peer: a message from node %d on member %d's stream", m.GetFrom(), from)
			}
			if m.GetTo() != t.cfg.NodeID {
				return status.Errorf(codes.InvalidArgument, "peer: message for node %d reached node %d", m.GetTo(), t.cfg.NodeID)
			}
			if t.member().isRemoved(m.GetFrom()) {
				// The one answer Raft gives with this code: the sender
				// learns it was removed (stream).
				return status.Errorf(codes.FailedPrecondition, "peer: member %d was removed from the group", m.GetFrom())
			}
			svc.deliver(m)
		}
	}
}

// send queues m, a message of group g, for its receiver; never blocks.
func (t *transport) send(g uint64, m *raftpb.Message) {
	om := outMsg{group: g, m: m}
	t.mu.RLock()
	p := t.peers[m.GetTo()]
	t.mu.RUnlock()
	if p == nil || p.conn == nil {
		t.reportSnap(om, false)
		return
	}
	select {
	case p.q <- om:
	default:
		if s := t.svc(g); s != nil {
			s.reportUnreachable(p.id)
		}
		t.reportSnap(om, false)
	}
}

// reportSnap tells the group's node the fate of m when it is a snapshot.
func (t *transport) reportSnap(m outMsg, ok bool) {
	if s := t.svc(m.group); s != nil && m.m.GetType() == raftpb.MessageType_MsgSnap {
		s.snapshotSent(m.m.GetTo(), ok)
	}
}

func (t *transport) runSender(p *peerSender) {
	defer t.wg.Done()
	defer p.conn.Close()
	backoff := 20 * time.Millisecond
	for {
		ok := t.stream(p.conn, p)
		select {
		case <-t.stop:
			return
		case <-p.stop:
			return
		default:
		}
		if ok {
			backoff = 20 * time.Millisecond
		} else {
			t.unreachable(p.id)
			select {
			case <-t.stop:
				return
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// stream sends p's queue over one stream until it breaks or the
// transport stops, each request a batch of what the queue holds; it
// reports whether any message went out.
func (t *transport) stream(conn *grpc.ClientConn, p *peerSender) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, mdClusterID, t.cfg.ClusterID, mdFromNode, fmt.Sprint(t.cfg.NodeID))
	if t.cfg.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, mdToken, t.cfg.Token)
	}
	var first outMsg
	select {
	case first = <-p.q:
	case <-t.stop:
		return true
	case <-p.stop:
		return true
	}
	s, err := clusterv1.NewPeerServiceClient(conn).Raft(ctx)
	if err != nil {
		t.reportSnap(first, false)
		return false
	}
	sent := false
	batch := []outMsg{first}
	for {
		// What else is queued goes in the same request.
	more:
		for len(batch) < maxSendBatch {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break more
			}
		}
		req := &clusterv1.RaftRequest{Messages: make([]*clusterv1.RaftMessage, 0, len(batch))}
		for _, m := range batch {
			b, err := proto.Marshal(m.m)
			if err != nil {
				t.logger.Error("peer: a raft message does not encode", "err", err)
				t.reportSnap(m, false)
				continue
			}
			req.Messages = append(req.Messages, &clusterv1.RaftMessage{Group: m.group, Message: b})
		}
		if err := s.Send(req); err != nil {
			for _, m := range batch {
				t.reportSnap(m, false)
			}
			// The stream ended: its status says why.
			if _, err := s.CloseAndRecv(); status.Code(err) == codes.FailedPrecondition {
				t.logger.Warn("peer: a member refuses this one's messages", "member", p.id, "err", err)
				t.member().removedByPeers(p.id)
			}
			return sent
		}
		for _, m := range batch {
			t.reportSnap(m, true)
		}
		sent = true
		batch = batch[:0]
		select {
		case m := <-p.q:
			batch = append(batch, m)
		case <-t.stop:
			_, _ = s.CloseAndRecv()
			return true
		case <-p.stop:
			cancel()
			return true
		}
	}
}

// conn is the connection to member id (nil: not a member, or its
// address does not parse). It may be closed under the caller when the
// member leaves the group; calls on it then fail.
func (t *transport) conn(id uint64) *grpc.ClientConn {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p := t.peers[id]; p != nil {
		return p.conn
	}
	return nil
}

func (t *transport) close() {
	t.mu.Lock()
	close(t.stop) // setPeers starts no sender after this
	t.mu.Unlock()
	t.srv.Stop()
	t.wg.Wait() // each sender closed its connection
}
