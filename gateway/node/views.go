package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/gateway/admin"
	"github.com/mqgate/mqgate/gateway/peer"
)

// The admin API's views of the node (gateway/admin's Options): the
// clients connected to its listeners, and its cluster.

// clients joins the gRPC session registry's clients and the remoting
// listener's.
func (n *Node) clients() []admin.Client {
	var out []admin.Client
	for _, c := range n.sess.Clients() {
		ac := admin.Client{Protocol: "grpc", ID: c.ID, Since: c.Since, LastSeen: c.LastSeen}
		if s := c.Settings; s != nil {
			ac.Roles = []string{s.ClientType.String()}
			ac.Language, ac.Version, ac.Hostname, ac.Address = s.UserAgent.Language, s.UserAgent.Version, s.UserAgent.Hostname, s.Addr
			ac.Topics = slices.Clone(s.PublishingTopics)
			for t := range s.Subscriptions {
				ac.Topics = append(ac.Topics, t)
			}
			slices.Sort(ac.Topics)
			if s.Group != "" {
				ac.Groups = []string{s.Group}
			}
		}
		out = append(out, ac)
	}
	if srv := n.remotingUp.Load(); srv != nil {
		for _, c := range srv.Clients() {
			ac := admin.Client{Protocol: "remoting", ID: c.ClientID, Address: c.Addr, Language: c.Language,
				Version: strconv.Itoa(int(c.Version)), Topics: c.Topics, Since: c.Since, LastSeen: c.LastSeen}
			if len(c.ProducerGroups) > 0 {
				ac.Roles = append(ac.Roles, "PRODUCER")
			}
			if len(c.ConsumerGroups) > 0 {
				role := "PUSH_CONSUMER"
				if c.ConsumeType == "CONSUME_ACTIVELY" {
					role = "PULL_CONSUMER"
				}
				ac.Roles = append(ac.Roles, role)
			}
			ac.Groups = append(slices.Clone(c.ProducerGroups), c.ConsumerGroups...)
			out = append(out, ac)
		}
	}
	return out
}

// boundAddr is the address listener name is bound to ("" when it is not
// bound); n.lis is not written once Open has bound the listeners.
func (n *Node) boundAddr(name string) string {
	if lis := n.lis[name]; lis != nil {
		return lis.Addr().String()
	}
	return ""
}

// clusterView is the node as gateway/admin's Cluster: a single node, or
// a member of a cluster with one raft group ("broker") or several data
// groups ("data-0", "data-1", ...).
type clusterView struct{ n *Node }

// raftGroupName names the one raft group, which replicates the whole
// broker.
const raftGroupName = "broker"

// memberAsk bounds how long Status waits for another member's answer.
const memberAsk = 2 * time.Second

func (v clusterView) Status(ctx context.Context) (admin.ClusterStatus, error) {
	n := v.n
	if n.raft == nil {
		m := admin.ClusterMember{Role: "STANDALONE", Health: "UP", Self: true, GRPCAddress: n.boundAddr("grpc-addr"),
			HTTPAddress: n.boundAddr("http-addr"), RemotingAddress: n.boundAddr("remoting-addr")}
		if err := n.Ready(); err != nil {
			m.Health, m.HealthDetail = "DOWN", err.Error()
		}
		return admin.ClusterStatus{Members: []admin.ClusterMember{m}}, nil
	}
	out := admin.ClusterStatus{Clustered: true, ClusterID: n.cfg.ClusterID, NodeID: n.raft.ID()}
	if !n.multiGroup() {
		g, members, err := groupView(ctx, hostedGroupAsk(n.raft), raftGroupName)
		if err != nil {
			return admin.ClusterStatus{}, err
		}
		out.Members, out.Groups = members, []admin.RaftGroup{g}
		return out, nil
	}
	for _, dg := range n.groups {
		var ask groupAsk
		if dg.hosted() {
			ask = hostedGroupAsk(dg.raft)
		} else {
			ask = farGroupAsk(n.raft, dg)
		}
		g, members, err := groupView(ctx, ask, dataGroupName(dg.id))
		if err != nil {
			return admin.ClusterStatus{}, err
		}
		if dg.id == 0 {
			out.Members = members // group 0's members are every member
		} else {
			// A member is a leader when it leads any group.
			for _, m := range members {
				if i := slices.IndexFunc(out.Members, func(o admin.ClusterMember) bool { return o.ID == m.ID }); i >= 0 && m.Role == "LEADER" {
					out.Members[i].Role = "LEADER"
				}
			}
		}
		out.Groups = append(out.Groups, g)
	}
	return out, nil
}

// groupAsk is how groupView learns of one group: base is a member's view
// with the replication progress when it leads, member asks each member
// for its own, info is each member's client addresses.
type groupAsk struct {
	self   uint64 // this member
	base   func(ctx context.Context) (peer.Status, error)
	member func(ctx context.Context, id uint64) (peer.Status, error)
	info   func(ctx context.Context, id uint64) (peer.MemberInfo, error)
}

// hostedGroupAsk asks through raft, this member's raft member of the
// group, starting from its own view.
func hostedGroupAsk(raft *peer.Node) groupAsk {
	return groupAsk{self: raft.ID(), base: raft.Status, member: raft.MemberStatus, info: raft.MemberInfo}
}

// farGroupAsk asks, through raft (group 0's), the members of dg, a
// group this member does not host, starting from its leader's view (the
// first of its members that answers, while none is known).
func farGroupAsk(raft *peer.Node, dg *dataGroup) groupAsk {
	g := uint64(dg.id)
	member := func(ctx context.Context, id uint64) (peer.Status, error) { return raft.MemberGroupStatus(ctx, id, g) }
	return groupAsk{
		self: raft.ID(),
		base: func(ctx context.Context) (peer.Status, error) {
			ids := dg.votersNow()
			if l := dg.leader(); l != 0 {
				// The leader first: only it has the replicas' progress.
				ids = append([]uint64{l}, slices.DeleteFunc(slices.Clone(ids), func(id uint64) bool { return id == l })...)
			}
			var last error
			for _, id := range ids {
				actx, cancel := context.WithTimeout(ctx, memberAsk)
				st, err := member(actx, id)
				cancel()
				if err == nil {
					return st, nil
				}
				last = err
			}
			return peer.Status{}, fmt.Errorf("data group %d: none of its members %v answers: %w", dg.id, ids, last)
		},
		member: member,
		info:   raft.MemberInfo,
	}
}

// dataGroupName names data group g for operators ("data-<g>").
func dataGroupName(g int) string { return "data-" + strconv.Itoa(g) }

// groupView is the view of a group (named name), as ask learns it: its
// members' health, roles and client addresses, and each one's replica.
func groupView(ctx context.Context, ask groupAsk, name string) (admin.RaftGroup, []admin.ClusterMember, error) {
	st, err := ask.base(ctx)
	if err != nil {
		return admin.RaftGroup{}, nil, err
	}
	ids := append(slices.Clone(st.Voters), st.Learners...)
	slices.Sort(ids)
	// Every member's own status and client addresses, asked at once.
	type answer struct {
		st   peer.Status
		info peer.MemberInfo
		err  error
	}
	answers := make([]answer, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, memberAsk)
			defer cancel()
			a := &answers[i]
			if a.st, a.err = ask.member(actx, id); a.err == nil {
				a.info, _ = ask.info(actx, id)
			}
		}()
	}
	wg.Wait()
	g := admin.RaftGroup{Name: name, Leader: st.Leader, Term: st.Term, Commit: st.Commit, Transferee: st.LeadTransferee}
	var members []admin.ClusterMember
	for i, id := range ids {
		a := answers[i]
		voter := slices.Contains(st.Voters, id)
		m := admin.ClusterMember{ID: id, PeerAddress: st.Peers[id], Self: id == ask.self, Role: "UNKNOWN", Health: "UP",
			GRPCAddress: a.info.GRPC, HTTPAddress: a.info.HTTP, RemotingAddress: a.info.Remoting}
		if a.err != nil {
			m.Health, m.HealthDetail = "DOWN", shortError(a.err)
		} else {
			m.Role = roleOf(a.st.State, voter)
		}
		r := admin.RaftReplica{Member: id, Voter: voter, Applied: a.st.Applied, LastContact: st.LastContact[id]}
		if pr, ok := st.Progress[id]; ok {
			r.Match = pr.Match
			r.ReplicationState = strings.ToUpper(strings.TrimPrefix(pr.State, "State"))
			if st.Commit > pr.Match {
				r.Lag = st.Commit - pr.Match
			}
			if a.err == nil && !pr.RecentActive && id != st.ID {
				m.Health, m.HealthDetail = "DOWN", "the leader has not heard from it within an election timeout"
			}
		}
		if id == st.ID {
			r.LastContact = time.Time{}
		}
		members = append(members, m)
		g.Replicas = append(g.Replicas, r)
	}
	return g, members, nil
}

// roleOf names a member's raft state for operators.
func roleOf(state string, voter bool) string {
	switch {
	case !voter:
		return "LEARNER"
	case state == "StateLeader":
		return "LEADER"
	case state == "StateFollower":
		return "FOLLOWER"
	case state == "StateCandidate", state == "StatePreCandidate":
		return "CANDIDATE"
	}
	return "UNKNOWN"
}

// shortError is err's message without the gRPC prefix.
func shortError(err error) string {
	s := err.Error()
	if i := strings.Index(s, "desc = "); i >= 0 {
		s = s[i+len("desc = "):]
	}
	return s
}

func (v clusterView) StartTransfer(ctx context.Context, group string, to uint64) (uint64, error) {
	n := v.n
	raft, names := n.raft, raftGroupName
	if n.multiGroup() {
		raft = nil
		var all []string
		for _, dg := range n.groups {
			all = append(all, dataGroupName(dg.id))
			if group == dataGroupName(dg.id) {
				if !dg.hosted() {
					return 0, fmt.Errorf("%w (this member holds no replica of %s)", admin.ErrNotLead, group)
				}
				raft = dg.raft
			}
		}
		names = strings.Join(all, ", ")
	} else if group != raftGroupName {
		raft = nil
	}
	if raft == nil {
		return 0, fmt.Errorf("%w (the groups: %s)", admin.ErrNoGroup, names)
	}
	if !slices.Contains(raft.Members().Voters, to) {
		return 0, admin.ErrNotVoter
	}
	from := raft.ID()
	if !raft.IsLeader() {
		return 0, admin.ErrNotLead
	}
	if to == from {
		return from, nil
	}
	if err := raft.StartTransfer(ctx, to); err != nil {
		return 0, fmt.Errorf("%w: %v", admin.ErrNotLead, err)
	}
	return from, nil
}
