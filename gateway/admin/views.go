package admin

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// This file holds the operators' views the console, the CLI and the MCP
// server share: a queue's messages by offset or time, traffic counters,
// connected clients, the cluster and its leadership, and the caller.

// BrowseMessages reads a queue's stored messages (broker.BrowseQueue).
func (s *Service) BrowseMessages(ctx context.Context, req *adminv1.BrowseMessagesRequest) (*adminv1.BrowseMessagesResponse, error) {
	topic := req.GetTopic()
	if strings.TrimSpace(topic) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	if req.GetMax() < 0 || req.GetMax() > broker.MaxBrowse {
		return nil, status.Errorf(codes.InvalidArgument, "topic %q: max %d: want 0 (32) to %d", topic, req.GetMax(), broker.MaxBrowse)
	}
	if req.GetMaxBodyBytes() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "topic %q: max body bytes %d is negative", topic, req.GetMaxBodyBytes())
	}
	if err := s.check(ctx, auth.Access{Subscribe: topic}); err != nil {
		return nil, err
	}
	br := broker.BrowseRequest{Topic: topic, QueueID: req.GetQueueId(), Offset: req.GetOffset(), Max: int(req.GetMax())}
	if ts := req.GetTime(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "topic %q: time: %v", topic, err)
		}
		br.Time = ts.AsTime()
	}
	var b Broker = s.b
	if s.opts.Groups != nil {
		local, conn, err := s.opts.Groups.Queue(ctx, topic, req.GetQueueId())
		if err != nil {
			return nil, toStatus(err, "topic", topic)
		}
		if local == nil {
			return forwardTo[adminv1.BrowseMessagesResponse](ctx, conn, adminv1.AdminService_BrowseMessages_FullMethodName, req)
		}
		b = local
	}
	page, err := b.BrowseQueue(ctx, br)
	if err != nil {
		return nil, toStatus(err, "topic", topic)
	}
	maxBody := MaxLookupBody
	if n := int(req.GetMaxBodyBytes()); n > 0 && n < maxBody {
		maxBody = n
	}
	out := &adminv1.BrowseMessagesResponse{MinOffset: page.Min, MaxOffset: page.Max, StartOffset: page.Start, NextOffset: page.Next,
		Messages: make([]*adminv1.StoredMessage, 0, len(page.Messages))}
	for _, m := range page.Messages {
		out.Messages = append(out.Messages, storedToV1(broker.FoundMessage{Delivered: *m}, maxBody))
	}
	return out, nil
}

// GetStats reports the counters of every topic and subscription the
// caller may see.
func (s *Service) GetStats(ctx context.Context, _ *adminv1.GetStatsRequest) (*adminv1.GetStatsResponse, error) {
	now := time.Now()
	ts, err := s.b.ListTopics(ctx)
	if err != nil {
		return nil, toStatus(err, "topics", "")
	}
	traffic := map[string]broker.TopicTraffic{}
	for _, t := range s.b.TopicTraffic() {
		traffic[t.Topic] = t
	}
	out := &adminv1.GetStatsResponse{Time: timestamppb.New(now), StartTime: timestamppb.New(s.b.Started())}
	for _, t := range ts {
		if !s.sees(ctx, auth.Access{Route: t.Name}) {
			continue
		}
		stored, err := s.b.StoredMessages(ctx, t.Name)
		if err != nil {
			continue // deleted since it was listed
		}
		tr := traffic[t.Name]
		out.Topics = append(out.Topics, &adminv1.TopicStats{Topic: t.Name, Sent: tr.Messages, SentBytes: tr.Bytes, Stored: stored})
		out.Sent += tr.Messages
	}
	for k, n := range s.b.DeliveredCounts() {
		if !s.sees(ctx, auth.Access{Group: k.Group}) || !s.sees(ctx, auth.Access{Route: k.Topic}) {
			continue
		}
		out.Subscriptions = append(out.Subscriptions, &adminv1.SubscriptionStats{Group: k.Group, Topic: k.Topic, Delivered: n})
		out.Delivered += n
	}
	sort.Slice(out.Subscriptions, func(i, j int) bool {
		a, b := out.Subscriptions[i], out.Subscriptions[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Topic < b.Topic
	})
	return out, nil
}

// Client is a connected client as Options.Clients reports it.
type Client struct {
	// Protocol is "grpc" or "remoting".
	Protocol, ID                         string
	Roles                                []string
	Language, Version, Address, Hostname string
	Topics, Groups                       []string
	Since, LastSeen                      time.Time
}

// ListClients lists the connected clients (Options.Clients).
func (s *Service) ListClients(context.Context, *adminv1.ListClientsRequest) (*adminv1.ListClientsResponse, error) {
	out := &adminv1.ListClientsResponse{Clients: []*adminv1.Client{}}
	if s.opts.Clients == nil {
		return out, nil
	}
	cs := s.opts.Clients()
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Protocol != cs[j].Protocol {
			return cs[i].Protocol < cs[j].Protocol
		}
		return cs[i].ID < cs[j].ID
	})
	for _, c := range cs {
		pc := &adminv1.Client{Protocol: c.Protocol, ClientId: c.ID, Roles: c.Roles, Language: c.Language, Version: c.Version,
			Address: c.Address, Hostname: c.Hostname, Topics: c.Topics, Groups: c.Groups}
		if !c.Since.IsZero() {
			pc.Since = timestamppb.New(c.Since)
		}
		if !c.LastSeen.IsZero() {
			pc.LastSeen = timestamppb.New(c.LastSeen)
		}
		out.Clients = append(out.Clients, pc)
	}
	return out, nil
}

// Cluster is the cluster as the admin API shows and changes it; the node
// implements it over its raft member (nil Options.Cluster: a single
// node).
type Cluster interface {
	// Status is the cluster's members and raft groups as the answering
	// member sees them.
	Status(ctx context.Context) (ClusterStatus, error)
	// StartTransfer starts handing group's leadership to member to and
	// returns the member leading when it started. Errors: ErrNoGroup, a
	// member that is not a voter (ErrNotVoter), this member not leading.
	StartTransfer(ctx context.Context, group string, to uint64) (from uint64, err error)
}

// Errors a Cluster's StartTransfer may wrap.
var (
	ErrNoGroup  = errors.New("no such raft group")
	ErrNotVoter = errors.New("not a voter of the raft group")
	ErrNotLead  = errors.New("this member does not lead the raft group")
)

// ClusterStatus is GetClusterStatus's answer.
type ClusterStatus struct {
	Clustered bool
	ClusterID string
	NodeID    uint64
	Members   []ClusterMember
	Groups    []RaftGroup
}

// ClusterMember is one member (see adminv1.ClusterMember).
type ClusterMember struct {
	ID                                                     uint64
	PeerAddress, GRPCAddress, HTTPAddress, RemotingAddress string
	Role, Health, HealthDetail                             string
	Self                                                   bool
}

// RaftGroup is one raft group (see adminv1.RaftGroup).
type RaftGroup struct {
	Name                             string
	Leader, Term, Commit, Transferee uint64
	Replicas                         []RaftReplica
}

// RaftReplica is one member's replica (see adminv1.RaftReplica).
type RaftReplica struct {
	Member           uint64
	Voter            bool
	Match, Applied   uint64
	Lag              uint64
	LastContact      time.Time
	ReplicationState string
}

// GetClusterStatus reports the cluster (Options.Cluster), or the single
// node.
func (s *Service) GetClusterStatus(ctx context.Context, _ *adminv1.GetClusterStatusRequest) (*adminv1.GetClusterStatusResponse, error) {
	st := ClusterStatus{Members: []ClusterMember{{Role: "STANDALONE", Health: "UP", Self: true}}}
	if s.opts.Cluster != nil {
		var err error
		if st, err = s.opts.Cluster.Status(ctx); err != nil {
			return nil, status.Errorf(codes.Unavailable, "cluster status: %v", err)
		}
	}
	out := &adminv1.GetClusterStatusResponse{Clustered: st.Clustered, ClusterId: st.ClusterID, NodeId: st.NodeID,
		Members: make([]*adminv1.ClusterMember, 0, len(st.Members)), Groups: make([]*adminv1.RaftGroup, 0, len(st.Groups))}
	for _, m := range st.Members {
		out.Members = append(out.Members, &adminv1.ClusterMember{Id: m.ID, PeerAddress: m.PeerAddress, GrpcAddress: m.GRPCAddress,
			HttpAddress: m.HTTPAddress, RemotingAddress: m.RemotingAddress, Role: m.Role, Health: m.Health, HealthDetail: m.HealthDetail, Self: m.Self})
	}
	for _, g := range st.Groups {
		pg := &adminv1.RaftGroup{Name: g.Name, Leader: g.Leader, Term: g.Term, CommitIndex: g.Commit, LeadTransferee: g.Transferee}
		for _, r := range g.Replicas {
			pr := &adminv1.RaftReplica{Member: r.Member, Voter: r.Voter, MatchIndex: r.Match, AppliedIndex: r.Applied, Lag: r.Lag,
				ReplicationState: r.ReplicationState}
			if !r.LastContact.IsZero() {
				pr.LastContact = timestamppb.New(r.LastContact)
			}
			pg.Replicas = append(pg.Replicas, pr)
		}
		out.Groups = append(out.Groups, pg)
	}
	return out, nil
}

// TransferLeadership starts a leadership transfer (Options.Cluster).
func (s *Service) TransferLeadership(ctx context.Context, req *adminv1.TransferLeadershipRequest) (*adminv1.TransferLeadershipResponse, error) {
	if strings.TrimSpace(req.GetGroup()) == "" {
		return nil, status.Error(codes.InvalidArgument, "raft group name is required")
	}
	if req.GetTo() == 0 {
		return nil, status.Error(codes.InvalidArgument, "the member to lead (to) is required")
	}
	if s.opts.Cluster == nil {
		return nil, status.Error(codes.FailedPrecondition, "a single node has no raft group: start members with --cluster-id to run a cluster")
	}
	from, err := s.opts.Cluster.StartTransfer(ctx, req.GetGroup(), req.GetTo())
	switch {
	case errors.Is(err, ErrNoGroup):
		return nil, status.Errorf(codes.NotFound, "raft group %q: %v", req.GetGroup(), err)
	case errors.Is(err, ErrNotVoter):
		return nil, status.Errorf(codes.InvalidArgument, "raft group %q: member %d: %v", req.GetGroup(), req.GetTo(), err)
	case errors.Is(err, ErrNotLead):
		return nil, status.Errorf(codes.Unavailable, "raft group %q: %v; retry", req.GetGroup(), err)
	case err != nil:
		return nil, toStatus(err, "raft group", req.GetGroup())
	}
	return &adminv1.TransferLeadershipResponse{From: from, To: req.GetTo()}, nil
}

// WhoAmI names the caller.
func (s *Service) WhoAmI(ctx context.Context, _ *adminv1.WhoAmIRequest) (*adminv1.WhoAmIResponse, error) {
	if s.opts.Auth == nil {
		return &adminv1.WhoAmIResponse{Admin: true}, nil
	}
	u := auth.FromContext(ctx)
	if u == nil {
		return nil, status.Error(codes.Unauthenticated, "authentication required")
	}
	return &adminv1.WhoAmIResponse{AuthEnabled: true, AccessKey: u.AccessKey, Admin: u.Admin}, nil
}
