package peer

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// Admission of peer calls. Every call is admitted or refused by admit,
// which grpc runs when a call's headers arrive, before it creates the
// call's stream: a refused call's body is never read nor decoded (the
// caller gets its status, and at most one flow-control window of what
// it sent is buffered before that). A call is admitted when, in this
// order:
//
//  1. it names a method of the peer service;
//  2. it carries the peer token, when the member has one (compared in
//     constant time);
//  3. its metadata names this member's cluster;
//  4. a raft stream (Raft) names its sender (mdFromNode): a member this
//     one knows (its --peers, or added by the group), or one removed
//     from the group, which serveSend then tells so.
//
// With peer TLS the handshake comes first: a caller without a
// certificate of the peer CA never gets this far (tls.go). Within an
// admitted raft stream, a message whose From is not the stream's sender
// ends the stream. Each refusal is counted by reason (Refusals).
//
// Requests are bounded by method once admitted: a raft message may be
// as large as one entry (maxRaftMessage, the server's limit, checked
// before the message is read); every other request is a control request
// of a few bytes (maxControlRequest, decodeControl).

// Refusal reasons.
const (
	RefusedMethod      = "method"      // not a method of the peer service
	RefusedToken       = "token"       // no or another peer token
	RefusedCluster     = "cluster_id"  // no or another cluster id
	RefusedMember      = "member"      // a raft stream or message from an id that is not a member
	RefusedCertificate = "certificate" // peer TLS: no certificate of the peer CA
	RefusedSize        = "size"        // a request over its method's size limit
)

var refusalReasons = []string{RefusedMethod, RefusedToken, RefusedCluster, RefusedMember, RefusedCertificate, RefusedSize}

const (
	// maxRaftMessage bounds one raft message (a follower's append carries
	// whole entries; one entry is one append batch, itself bounded by the
	// listeners' request limits).
	maxRaftMessage = 64 << 20
	// maxControlRequest bounds every other request: a member id, an
	// address, an index; except Propose's, a change as large as a
	// metadata entry (maxProposeRequest), and CheckTransaction's, a half
	// message (maxCheckRequest: the largest body a send takes, 64 MiB
	// at most, and its properties).
	maxControlRequest = 4 << 10
	maxProposeRequest = (1 << 20) + (4 << 10)
	maxCheckRequest   = (64 << 20) + (1 << 20)
)

// refusals counts refused calls by reason.
type refusals struct {
	counts [6]atomic.Uint64 // by index in refusalReasons
}

func (r *refusals) add(reason string) {
	for i, name := range refusalReasons {
		if name == reason {
			r.counts[i].Add(1)
			return
		}
	}
}

func (r *refusals) snapshot() map[string]uint64 {
	out := make(map[string]uint64, len(refusalReasons))
	for i, name := range refusalReasons {
		out[name] = r.counts[i].Load()
	}
	return out
}

// peerMethods are the methods admit lets through.
var peerMethods = map[string]bool{
	raftMethod: true, infoMethod: true, statusMethod: true, transferMethod: true,
	copyMethod: true, addMethod: true, removeMethod: true, proposeMethod: true, readIdxMethod: true,
	checkTxMethod: true, hostMethod: true,
}

type fromKey struct{}

// admit is the peer server's tap.ServerInHandle (see the top of this
// file). It runs on the connection's reader goroutine: it only reads the
// headers and the address book.
func (t *transport) admit(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !peerMethods[info.FullMethodName] {
		t.refused.add(RefusedMethod)
		return ctx, status.Errorf(codes.Unimplemented, "peer: unknown method %s", info.FullMethodName)
	}
	if err := t.checkCredentials(info.Header); err != nil {
		return ctx, err
	}
	if info.FullMethodName != raftMethod {
		return ctx, nil
	}
	v := info.Header.Get(mdFromNode)
	var from uint64
	if len(v) == 1 {
		from, _ = strconv.ParseUint(v[0], 10, 64)
	}
	if from == 0 || from == t.cfg.NodeID || !t.member().knows(from) {
		t.refused.add(RefusedMember)
		return ctx, status.Errorf(codes.PermissionDenied, "peer: raft messages from %v: not a member of this group", v)
	}
	return context.WithValue(ctx, fromKey{}, from), nil
}

// checkCredentials checks a call's token (when the member has one),
// then its cluster id; the cluster id is named in an answer only to a
// caller that holds the token.
func (t *transport) checkCredentials(md metadata.MD) error {
	if t.cfg.Token != "" {
		v := md.Get(mdToken)
		if len(v) != 1 || subtle.ConstantTimeCompare([]byte(v[0]), []byte(t.cfg.Token)) != 1 {
			t.refused.add(RefusedToken)
			return status.Errorf(codes.Unauthenticated, "peer: missing or wrong peer token")
		}
	}
	if v := md.Get(mdClusterID); len(v) != 1 || v[0] != t.cfg.ClusterID {
		t.refused.add(RefusedCluster)
		return status.Errorf(codes.PermissionDenied, "peer: cluster id %v, this node belongs to %q", v, t.cfg.ClusterID)
	}
	return nil
}

// streamSender is the member a raft stream admitted by admit comes from.
func streamSender(ctx context.Context) uint64 {
	id, _ := ctx.Value(fromKey{}).(uint64)
	return id
}

// rawCodec is the peer server's codec: protobuf, except that a
// rawRequest receives a request's bytes undecoded, for decodeControl to
// check their size first.
type rawCodec struct{ encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{CodecV2: encoding.GetCodecV2("proto")} }

type rawRequest struct{ b []byte }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		r.b = data.Materialize()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// decodeControl receives a control request with recv and decodes it
// into req, refusing one over limit bytes (ResourceExhausted).
func (t *transport) decodeControl(recv func(any) error, req proto.Message, limit int) error {
	var raw rawRequest
	if err := recv(&raw); err != nil {
		return err
	}
	if len(raw.b) > limit {
		t.refused.add(RefusedSize)
		return status.Errorf(codes.ResourceExhausted, "peer: a request of %d bytes exceeds the limit of %d", len(raw.b), limit)
	}
	if err := proto.Unmarshal(raw.b, req); err != nil {
		return status.Errorf(codes.InvalidArgument, "peer: request: %v", err)
	}
	return nil
}

// ErrNoPeerAuth: a member must authenticate its peers (Config.Token or
// Config.TLS).
var ErrNoPeerAuth = errors.New("peer: the members must authenticate each other: set a peer token or peer TLS")

// checkAuthConfig refuses a Config without peer authentication.
func checkAuthConfig(cfg Config) error {
	if cfg.Token == "" && cfg.TLS == nil {
		return fmt.Errorf("%w (member %d of cluster %q)", ErrNoPeerAuth, cfg.NodeID, cfg.ClusterID)
	}
	return nil
}
