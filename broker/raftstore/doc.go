// Package raftstore is the replicated store of a broker set: three (or
// more) members, one raft group, one commit log that every member holds
// byte for byte. It owns the state-machine side: the raft entry format,
// the Replica (a storage.Store written only by applying committed
// entries, in raft-log order), the applied position that survives a
// crash, and the answer an Append gets. The raft node itself (raft
// library, WAL, peer transport) is gateway/peer's: this package never
// sees a protobuf type; it reaches the node through the Raft interface.
//
// # Entries
//
// One raft entry is one commit-log append batch: the messages of every
// Append that came while raft's loop was busy, each Append's messages
// contiguous (the group commit, batch.go: the entry is built when the
// loop takes the proposal, and its receipt split among the Appends it
// carries). Its bytes (entry.go):
//
//	0   1  version (1)
//	1   1  kind (1: append; 2: a metadata change, below)
//	2   8  proposer: a random id of the proposing process (incarnation)
//	10  8  sequence number of the proposal in that process
//	18  8  store time, unix ms, fixed by the proposer
//	26 16  the proposer's store geometry: segment size (8), max record
//	       size (4), max body size (4)
//	42  2  store host length, then the host
//	    4  message count, then per message:
//	    4  record length, then the record in the commit log's own format
//	       (package message), sealed at offset 0 (CRC-checked)
//
// Applying an entry appends its messages with storage.AppendStamped,
// store time and store host taken from the entry (the time raised to the
// last one applied, so store times stay monotonic across leaders). The
// physical and queue offsets follow from the log, so members that apply
// the same entries in the same order from the same state (same
// SegmentSize and size limits) write the same bytes: a receipt handle or
// offset message id is valid on every member. A member whose geometry
// differs from the one an entry carries stops (Failed) instead of
// applying it: it would write other bytes; it says how to go on. It
// decodes an entry's records within the limits the entry's own header
// names, so a member with other limits sees the difference instead of
// taking a record for bad bytes. Only the apply step writes
// a replica's commit log. A batch the store rejects for its content
// (ErrInvalid, ErrTooLarge) is rejected by every member alike and
// stored by none. A write that fails for lack of disk space changes
// nothing (the store's appends and metadata writes are all or nothing):
// Apply answers ErrNoSpace without stopping, and the raft loop applies
// the same entry again once there is room (gateway/peer). Any other
// store error (I/O) stops the replica (Failed), since a member cannot
// skip an entry the others hold. The leader refuses new messages while
// its own disk is below the disk reserve (storage's CheckSpace, asked
// by the broker), so on members with disks alike the entries that reach
// a nearly full disk are the ones consumers need to drain it.
//
// Metadata changes (kindMeta, meta.go: topics, groups, offsets, the
// bootstrap with the cluster id and the receipt-handle key, barriers,
// the group's entry format, the token key rings) are the other kind.
//
// What entries may hold is the group's entry format (format.go), part of
// the replicated state: a leader raises it only once every member reads
// the new one, proposes only what the current one allows, and a member
// that meets a format above what it reads stops and says to upgrade it.
// The keys that sign client-held tokens (receipt handles, transaction
// ids, recall handles) are replicated key rings, rotated by the leader
// with the earlier keys kept for their tokens' lifetime (keys.go). A committed entry that does not decode (bytes
// that are no entry, an unknown kind, a batch cut short, a change that
// is not valid JSON) is applied as a no-op by every member alike, since
// every member decodes the same bytes the same way: the replicas stay
// identical and the group keeps serving (Undecodable counts them). The
// leader proposes only what encodeAppend and encodeMeta built from
// checked input, so such an entry never comes from a member of this
// version.
//
// # Answers
//
// Append proposes through the leader's raft node and waits until the
// entry is committed (in the raft logs of a majority, each fsynced
// before it acknowledged) and applied to this member's store, then
// returns the store's receipt (DurabilityLocal: the raft logs are the
// durability point). It never answers OK for an entry that is not
// committed. Otherwise:
//
//   - *NotLeaderError (errors.Is ErrNotLeader): this member does not
//     lead; it names the leader (id and peer address) when one is known.
//     An error that is ErrNotLeader also answers a proposal made for
//     another of this member's leader terms: MarkLeading(term) marks the
//     replica for the term a broker's services are built in, ForTerm marks
//     a context with the term its caller's services were built in, and the
//     raft node refuses a proposal for any term but its own, before it
//     builds the entry. Nothing of it is proposed.
//   - ErrLeadershipLost: the member stopped leading before the entry
//     committed. The entry may still commit under the next leader; the
//     client's message id is the dedup key if it retries.
//   - ErrNoQuorum: no leader known, or the entry not committed, within
//     CommitTimeout. An entry raft has taken may still commit after
//     that: its outcome is uncertain, and Uncertain counts it, so that
//     the leader rebuilds what it keeps in memory from the store.
//
// Once raft has taken an entry, Append waits for its outcome whatever
// the caller's context does: the waiting caller (a broker service about
// to change its memory) must learn whether the change happened.
//
// A member that does not lead can still change the catalog of a cluster
// of several data groups (topics, groups, a topic's queues dropped):
// gateway/peer hands the change, encoded by EncodeChange, to the
// leader, whose ProposeForwarded reads it (DecodeChange: catalog changes
// only, ErrRefused otherwise), proposes it as its own and answers the
// raft index it was applied at; WaitApplied then returns once this
// member's replica has applied that index too.
//
// # Applied position and crashes
//
// The raft log (etcd's WAL) is what survives; a member's store runs in
// async mode whatever the node's flush policy (an fsync per applied entry
// would repeat the raft log's, on the raft loop), so it may lose its tail,
// or hold entries applied after the last position it recorded. Every PersistEvery applied entries (and on Close)
// the replica fsyncs the commit log (Store.Sync) and then writes
// dir/applied atomically (write, fsync, rename, fsync directory): the
// index of the last applied entry, the log end after it and the last
// store time. On open the store is cut at that log end
// (storage.OpenCut): records applied after it are removed with their
// queue and index entries, and the raft node hands every entry after the
// recorded index over again; they are applied again to the same bytes.
// So an entry is never applied twice (the store holds each entry's
// records at most once: the cut removes whatever a crash left of later
// entries, whole or torn) nor skipped (the raft log keeps every entry
// after the recorded index: gateway/peer compacts it only up to
// Persisted).
//
// # Goroutines
//
// Apply, Persist and LeadershipLost are called by the raft loop only
// (one goroutine), and so is the builder of an entry Propose is given;
// Append from any goroutine. While Appends are queued, one proposer
// goroutine of the replica hands their entries to raft (batch.go); it
// ends when the queue is empty, and Close and Abandon wait for it. Close
// after the raft loop has stopped.
//
// Files: entry.go (the entry format and its kinds, kindMeta included),
// meta.go (the metadata changes kindMeta carries), replica.go (Replica:
// proposing, applying in raft-log order, the answer an Append gets),
// snapshot.go (catching a member up from a copy of another member's store),
// state.go (the applied position that survives a crash), format.go (the
// group's entry format version), keys.go (the token key rings made the
// group's), errors.go (the error sentinels).
//
// # Imports
//
// cluster imports broker/, storage/ and internal/ only: never gen/,
// gateway/, grpc or protobuf (raft's types included).
package raftstore
