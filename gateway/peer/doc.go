// Package peer is a broker-set member's raft node and the transport
// between members. It runs go.etcd.io/raft/v3 (a RawNode, pre-vote and
// check-quorum on) with etcd's WAL (server/v3/storage/wal) as the raft
// log, and feeds committed entries to an Applier (broker/raftstore's
// Replica), which owns the state machine, the entry format and the
// answers Append gets (see broker/raftstore's doc.go).
//
//	rep, _ := raftstore.OpenReplica(dir+"/replica", raftstore.Options{...})
//	node, _ := peer.Start(peer.Config{ClusterID, NodeID, Peers, WALDir: dir + "/wal"}, rep)
//	rep.Attach(node)
//	res, err := rep.Append(ctx, msgs...)   // on the leader
//	st, _ := node.Status(ctx)              // term, leader, commit, members' progress and last contact
//	st, _ = node.MemberStatus(ctx, id)     // another member's own Status, over the peer transport
//	node.TransferLeadership(ctx, id)       // on the leader; StartTransfer does not wait
//	info, _ := node.MemberInfo(ctx, node.Leader()) // the leader's client addresses
//	node.Handoff(ctx)                      // graceful shutdown: hand the leadership over
//	node.Stop(); rep.Close(ctx)
//
// StartGroups starts a member hosting several raft groups (a cluster's
// data groups): a Node per group, each with its own raft loop, WAL and
// Applier, all sharing one transport (one raft stream per member pair
// carries every group's messages, tagged with their group) and one peer
// listener, which stops with the last of them. Every group is
// bootstrapped with the same members, and a member joins and leaves
// every group: DialAddMember adds it to each group in turn, the first
// first, DialRemoveMember removes it from each, the first last (the
// transport dials the members of the first group, whose book also says
// who may send). Start is StartGroups of one group. A member may host
// some of the groups only (a Group without an Applier is one it does
// not host; Group.Voters bootstraps a group with some members only):
// Info then answers the leader, term and voters of each group it hosts
// (GroupLeaders asks them), a group's Status is asked of a member
// hosting it (MemberGroupStatus, and DialGroupStatus moves on to one),
// and a change is proposed to a group's leader by id (ProposeAtMember).
// In such a cluster (Config.GroupReplicas) DialAddMember adds a member
// to group 0 and the data groups it hosts, removing in each the voter
// holding the most replicas once it votes; a member is replaced
// (DialReplaceMember: the new one added to group 0 and, in turn, to each
// data group of the old one, which is removed there once the new one
// votes, and from group 0 last); DialGroupVoters tells a new member the
// groups' voters. A replica moves between running members
// (DialMoveReplica): the peer HostGroup call has the new one start the
// group's node (Config.HostGroup, then Node.StartGroup), it is added,
// and the old one removed; DialRemoveMember moves a member's replicas off
// it before it leaves group 0, and DialRebalance evens the members'
// replicas out. A member removed from a data group while it runs no
// longer answers for it (its late raft messages are dropped); WasRemoved
// reads a group's address book for that.
//
// ParsePeers reads the members from "1=host:port,2=host:port,...".
// AddMember and RemoveMember (on the leader; DialAddMember and
// DialRemoveMember through any member) change the group one member at a
// time: a new member (Config.Join) joins as a learner and is promoted
// once caught up (until it is added it asks the members its Config.Peers
// names for the others, learnMembers, so that a leader it was not told
// of reaches it); a removed one stops with ErrRemoved (membership.go).
// Where each member is dialled is the address book's (members.go).
//
// Changes returns a channel closed at the next change of the leader this
// node knows or of whether it leads; a listener that redirects clients
// to the leader takes the channel, reads Leader and IsLeader, and takes
// a new channel when it closes. MemberInfo gives a member's client
// addresses (Config.Info of that member, asked over the Info method and
// kept for 10 seconds; ForgetMemberInfo drops it when an address
// failed). Handoff, on the leader, transfers the leadership to a
// reachable, caught-up voter and waits until this node no longer leads.
//
// # The raft loop
//
// One goroutine owns the RawNode, the memory storage and the WAL. Each
// turn it takes every message and proposal waiting, builds the
// proposals' entries (Propose is given a builder the loop calls, so an
// entry holds whatever its proposer had queued by then; a proposal made
// for another leader term than the node's is refused before its builder
// runs) and steps them into raft as one proposal message, so that one
// append per follower carries them (raft sends an append per proposal
// message). For each
// Ready it writes the entries and hard state to the WAL (fsynced
// when raft says they must be) — a follower before it sends its
// messages, the leader after sending, so that the followers' fsyncs run
// alongside its own — then applies the committed entries (configuration changes to raft, every
// entry's index to the Applier) and advances. A leader holds back the
// appends that would only tell a follower a newer commit index, up to a
// fifth of a tick, and drops one when a later append to that follower
// carries the index (sendAll); it sends them at once after applying a
// change another member proposed through it (that member waits to apply
// it). A new member (no WAL)
// bootstraps the group with the configured peers. On restart the WAL is
// read from its last raft snapshot record; raft's Applied is that
// record's index, so every entry after it is handed to the Applier
// again (configuration changes included) and the Applier skips what it
// has applied already. A WAL that ends in a torn record (the write a
// crash interrupted: no Save covering it returned, so nothing in it was
// acknowledged) is repaired (wal.Repair cuts the record) and read again.
//
// Compaction: when the Applier's Persisted index has advanced
// SnapshotEvery entries, the node records a raft snapshot at it in the
// WAL (metadata only: index, term, configuration; the store is the
// state), releases the WAL files before it and drops in-memory entries
// more than KeepEntries below it. A member that lags further than that
// gets raft's snapshot message (copy.go): before the message is stepped
// into raft, a background goroutine copies a checkpoint of another
// member's store over the CopyStore stream (the Applier's Checkpoint,
// OpenSegment and StageCopy) while the raft loop goes on; then the
// member steps the message, records the snapshot and hard state in its
// WAL, and stops with raftstore.ErrCopyStaged; reopened, its replica
// installs the copy. A snapshot message no member can send a copy for is
// dropped; one at or below what the store already holds is recorded
// without a copy. A snapshot records the configuration in force at its
// index. The transport reports whether a snapshot message went out (raft
// sends that member nothing more until it knows).
//
// Status reports what the loop did since the member started (Work:
// rounds, raft log writes and fsyncs, entries written and applied,
// proposals, messages sent and received), which divided by the messages
// clients sent is replication's cost per message.
//
// An error the loop cannot get past (WAL write, an Applier error) stops
// the node: Done is closed, Err says why, appends fail with
// raftstore.ErrStopped. An entry the Applier could not apply for lack of
// disk space (raftstore.ErrNoSpace: nothing of it applied) is not such an
// error: the loop applies it again every second until it fits (Stalled
// says so meanwhile), doing nothing else, so the others see a member
// that is down until it has room; then it goes on from that entry. A
// members file that cannot be written for lack of space (ENOSPC,
// EDQUOT) waits the same way: the change, applied to raft once, is
// written to the file again until it fits.
//
// # Transport
//
// gRPC on the peer address: mqgate.cluster.v1.PeerService, defined in
// proto/mqgate/cluster/v1/peer.proto and generated into gen/ (it only
// grows: `make check-breaking` holds it to the last release's, since
// members of two versions meet during an upgrade). Served by server.go:
//
//   - Raft, client-streaming RaftRequest: the raft traffic, batches of
//     raft messages (raftpb.Message, marshaled) each tagged with its
//     group. Each member keeps one stream to each other member, fed from
//     a bounded queue by one sender goroutine, which puts what is queued
//     into one request; a full queue or a broken stream drops messages
//     (raft retransmits) and reports the member unreachable.
//   - Info: the member's id, the leader it knows, its MemberInfo and its
//     wall clock (MemberInfo, ClockOffset).
//   - Status: the member's Status of a group, peer addresses included
//     (DialStatus; `mqgate cluster status`).
//   - TransferLeadership: answered once that member leads; a member that
//     does not lead answers FailedPrecondition naming the leader's id,
//     an unknown member is InvalidArgument (DialTransfer, which retries
//     once at the leader; `mqgate cluster transfer-leader`).
//   - AddMember and RemoveMember: a membership change of a group,
//     answered by its leader (FailedPrecondition elsewhere, as above).
//   - CopyStore: a Checkpoint as JSON, then the segments' bytes in 1 MiB
//     chunks (copy.go).
//   - Propose and ReadIndex (forward.go): a change proposed through a
//     member that does not lead the group (ProposeAtLeader: the leader's
//     Applier, a ForwardedProposer, applies it and answers its index),
//     and a read index from the leader (LeaderReadIndex); with
//     Replica.WaitApplied a member catches its own replica up with them.
//   - CheckTransaction (forward.go): a transaction check passed on to a
//     member that may hold a control stream of a producer of the topic
//     (CheckTransactionAt; answered by the TransactionChecker installed
//     with SetTransactionChecker, not sent without one).
//
// Info, AddMember, RemoveMember and CheckTransaction concern the member
// (its group 0);
// Status, TransferLeadership, CopyStore, Propose and ReadIndex name their
// group. A call or raft message for a group the member does not host is
// refused (NotFound; a raft stream ends with InvalidArgument). Info
// reports how many groups the member hosts.
//
// A member authenticates its peers: Start refuses a Config with neither
// a Token nor TLS (ErrNoPeerAuth). Every call is admitted before its
// body is read (auth.go): its metadata must carry the token (compared in
// constant time; Unauthenticated otherwise) and this member's cluster
// id (PermissionDenied otherwise); a raft stream must name its sender, a
// member this one knows, and carry only that sender's messages. Control
// requests are bounded to a few KiB (Propose's to a metadata entry,
// CheckTransaction's to a half message), raft messages to one entry.
// Refusals are counted by reason (Refusals). WithToken adds the token to
// the calls of DialStatus, DialTransfer, DialAddMember and
// DialRemoveMember. IssueCerts (certs.go) writes a CA for a group and a
// certificate per member (`mqgate cluster init-certs`).
//
// With Config.TLS set (LoadTLS), the transport is mutual TLS (tls.go):
// the peer listener requires a client certificate signed by the
// configured CA and refuses any other caller during the handshake, and
// every connection to a member (the raft streams, Info, CopyStore)
// verifies the member's certificate against the same CA; WithTLS gives
// the Dial functions the same. Host names are not verified: any
// certificate the CA signed is a member's, whatever address was dialled
// (members may be dialled at IP addresses or through a sidecar), so the
// CA must sign this group's peer certificates only. The files are read
// again when they change. The cluster id and the token are checked with
// TLS too.
//
// Without TLS, peer traffic (the token included) is not encrypted: the
// peer address then belongs on a private network.
//
// Files: node.go (Node: StartGroups, the raft loop, proposals, the WAL and
// snapshots), transport.go (the raft streams of mqgate.cluster.v1.PeerService
// between members), rpc.go (the control calls a member makes: member
// info, clock offsets, status and leadership transfers through any
// member), dialmembers.go (adding, replacing and removing members through
// any member), forward.go (changes and reads through the leader),
// status.go (Status and each member's progress), moves.go
// (moving data groups' replicas between members: DialMoveReplica, the
// removal of a member of replica sets, DialRebalance, and the plans of
// those moves and of the replicas a new member takes, GrowMoves).
//
// # Imports
//
// peer may import broker/raftstore (its Applier and errors), gen's
// mqgate/cluster/v1 (its protocol), internal/clock, raft, etcd's
// WAL, grpc and protobuf; never storage/ (it reaches the store through
// the Applier) nor other gateway listeners.
package peer
