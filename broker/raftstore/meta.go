package raftstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/metastore"
)

// MetaKind names a replicated change other than a message batch.
type MetaKind string

const (
	// MetaPutTopic creates or replaces Topic.
	MetaPutTopic MetaKind = "put-topic"
	// MetaDeleteTopic removes the topic Name and its committed offsets.
	MetaDeleteTopic MetaKind = "delete-topic"
	// MetaDropQueues writes the commit log's deletion record for the
	// topic Name (storage.Store.DeleteTopic): its queues end there.
	MetaDropQueues MetaKind = "drop-queues"
	// MetaPutGroup creates or replaces Group.
	MetaPutGroup MetaKind = "put-group"
	// MetaDeleteGroup removes the group Name and its committed offsets.
	MetaDeleteGroup MetaKind = "delete-group"
	// MetaCommitOffset records Offset for OffsetKey.
	MetaCommitOffset MetaKind = "commit-offset"
	// MetaBootstrap fixes the cluster's identity and receipt-handle key
	// (Bootstrap). The first one applied wins; later ones change nothing.
	MetaBootstrap MetaKind = "bootstrap"
	// MetaBarrier changes nothing: once it is applied, so is every entry
	// committed before it (Barrier).
	MetaBarrier MetaKind = "barrier"
	// MetaSetFormat raises the group's entry format to Format
	// (format.go).
	MetaSetFormat MetaKind = "set-format"
	// MetaPutKeys replaces the token key rings named in Keys (keys.go).
	MetaPutKeys MetaKind = "put-keys"
)

// MetaOp is one replicated metadata change. Only the fields its Kind
// names are set.
type MetaOp struct {
	Kind      MetaKind             `json:"kind"`
	Topic     *metastore.Topic     `json:"topic,omitempty"`
	Group     *metastore.Group     `json:"group,omitempty"`
	Name      string               `json:"name,omitempty"`
	OffsetKey *metastore.OffsetKey `json:"offset_key,omitempty"`
	Offset    int64                `json:"offset,omitempty"`
	Bootstrap *Bootstrap           `json:"bootstrap,omitempty"`
	// Format: MetaSetFormat (group format 2 on).
	Format int `json:"format,omitempty"`
	// Keys: MetaPutKeys, key ring blobs by name (group format 2 on).
	Keys map[string][]byte `json:"keys,omitempty"`
}

// Bootstrap is what the first leader of a cluster fixes for all time:
// the cluster id (a member configured with another one stops rather than
// join its data) and the receipt-handle key blob (pop.KeyBlob).
type Bootstrap struct {
	ClusterID string `json:"cluster_id"`
	HandleKey []byte `json:"handle_key"`
}

// clusterBlob records the applied bootstrap's cluster id.
const clusterBlob = "cluster-id"

// metaEntry is a decoded kindMeta entry.
type metaEntry struct {
	proposer  uint64
	seq       uint64
	storeTime int64
	storeHost string
	op        MetaOp
}

const metaHeadSize = 2 + 8 + 8 + 8 + 2 // version, kind, proposer, seq, store time, host length

// maxMetaEntry bounds a meta entry (a topic or group with its attributes).
const maxMetaEntry = 1 << 20

func encodeMeta(e *metaEntry) ([]byte, error) {
	if len(e.storeHost) > maxStoreHost {
		return nil, fmt.Errorf("%w: store host of %d bytes", ErrBadEntry, len(e.storeHost))
	}
	body, err := json.Marshal(&e.op)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, metaHeadSize+len(e.storeHost)+len(body))
	b = append(b, entryVersion, kindMeta)
	b = binary.BigEndian.AppendUint64(b, e.proposer)
	b = binary.BigEndian.AppendUint64(b, e.seq)
	b = binary.BigEndian.AppendUint64(b, uint64(e.storeTime))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.storeHost)))
	b = append(b, e.storeHost...)
	b = append(b, body...)
	if len(b) > maxMetaEntry {
		return nil, fmt.Errorf("%w: metadata change of %d bytes", errTooLarge, len(b))
	}
	return b, nil
}

func decodeMeta(b []byte) (*metaEntry, error) {
	if k, err := entryKind(b); err != nil {
		return nil, err
	} else if k != kindMeta {
		return nil, fmt.Errorf("%w: kind %d is not a metadata change", ErrBadEntry, k)
	}
	if len(b) < metaHeadSize || len(b) > maxMetaEntry {
		return nil, fmt.Errorf("%w: metadata entry of %d bytes", ErrBadEntry, len(b))
	}
	e := &metaEntry{
		proposer:  binary.BigEndian.Uint64(b[2:]),
		seq:       binary.BigEndian.Uint64(b[10:]),
		storeTime: int64(binary.BigEndian.Uint64(b[18:])),
	}
	hl := int(binary.BigEndian.Uint16(b[26:]))
	p := metaHeadSize
	if len(b) < p+hl {
		return nil, fmt.Errorf("%w: short store host", ErrBadEntry)
	}
	e.storeHost = string(b[p : p+hl])
	dec := json.NewDecoder(bytes.NewReader(b[p+hl:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e.op); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrBadEntry)
	}
	if err := e.op.check(); err != nil {
		return nil, err
	}
	return e, nil
}

// check reports an op whose Kind lacks the fields it needs.
func (op *MetaOp) check() error {
	ok := false
	switch op.Kind {
	case MetaPutTopic:
		ok = op.Topic != nil
	case MetaPutGroup:
		ok = op.Group != nil
	case MetaDeleteTopic, MetaDropQueues, MetaDeleteGroup:
		ok = op.Name != ""
	case MetaCommitOffset:
		ok = op.OffsetKey != nil
	case MetaBarrier:
		ok = true
	case MetaBootstrap:
		ok = op.Bootstrap != nil && op.Bootstrap.ClusterID != "" && len(op.Bootstrap.HandleKey) >= 20
	case MetaSetFormat:
		ok = op.Format >= 1
	case MetaPutKeys:
		ok = checkKeys(op.Keys) == nil
	}
	if !ok {
		return fmt.Errorf("%w: metadata change %q without its fields", ErrBadEntry, op.Kind)
	}
	return nil
}

// ProposeMeta replicates op and waits, as Append does, until it is
// committed and applied to this member. Errors are Append's; a change the
// metadata store refuses for its content (storage.ErrInvalid,
// storage.ErrNotFound) is refused by every member alike.
func (r *Replica) ProposeMeta(ctx context.Context, op MetaOp) (storage.AppendResult, error) {
	if err := op.check(); err != nil {
		return storage.AppendResult{}, fmt.Errorf("%w: %w", storage.ErrInvalid, err)
	}
	res, err := r.proposeMetaIndexed(ctx, op, r.termFor(ctx))
	return res.res, err
}

// ProposeForwarded proposes a catalog change that another member sent
// this one, leading (a topic or a group put or deleted, a topic's queues
// dropped: gateway/peer's Propose), as ProposeMeta does, and returns the
// raft index it was applied at. change is the MetaOp in JSON, read as
// strictly as an entry is; any other kind of change, and a change the
// store refuses for its content, is refused (ErrRefused).
func (r *Replica) ProposeForwarded(ctx context.Context, change []byte) (uint64, error) {
	op, err := DecodeChange(change)
	if err != nil {
		return 0, err
	}
	// Not fenced: the change is the forwarding member's, whichever of
	// this member's terms takes it.
	res, err := r.proposeMetaIndexed(ctx, op, 0)
	if errors.Is(err, storage.ErrInvalid) || errors.Is(err, storage.ErrNotFound) {
		return res.index, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return res.index, err
}

// EncodeChange is op as ProposeForwarded reads it.
func EncodeChange(op MetaOp) ([]byte, error) { return json.Marshal(&op) }

// DecodeChange reads a change EncodeChange wrote, as strictly as an
// entry is read, and refuses (ErrRefused) any that is not a catalog
// change with its fields.
func DecodeChange(change []byte) (MetaOp, error) {
	var op MetaOp
	dec := json.NewDecoder(bytes.NewReader(change))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&op); err != nil {
		return MetaOp{}, fmt.Errorf("%w: not a metadata change: %v", ErrRefused, err)
	}
	if dec.More() {
		return MetaOp{}, fmt.Errorf("%w: trailing data after the change", ErrRefused)
	}
	switch op.Kind {
	case MetaPutTopic, MetaDeleteTopic, MetaPutGroup, MetaDeleteGroup, MetaDropQueues:
	default:
		return MetaOp{}, fmt.Errorf("%w: %q is not a change other members propose", ErrRefused, op.Kind)
	}
	if err := op.check(); err != nil {
		return MetaOp{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return op, nil
}

// proposeMetaIndexed is ProposeMeta for leader term term (0: any; see
// Replica.fence), answering the applied index too.
func (r *Replica) proposeMetaIndexed(ctx context.Context, op MetaOp, term uint64) (applyResult, error) {
	if need := minFormat(&op); need > r.Format() {
		return applyResult{}, fmt.Errorf("%w: %s needs format %d, the group is at %d", ErrFormat, op.Kind, need, r.Format())
	}
	seq := r.seq.Add(1)
	data, err := encodeMeta(&metaEntry{proposer: r.incarnation, seq: seq, storeTime: r.stamp(), storeHost: r.opts.StoreHost, op: op})
	if err != nil {
		return applyResult{}, fmt.Errorf("cluster: %s: %w", op.Kind, err)
	}
	return r.proposeIndexed(ctx, seq, data, term)
}

// Bootstrap proposes the cluster's bootstrap (a new random receipt-handle
// key) unless one is applied already, and waits for it. The leader calls
// it before it serves.
func (r *Replica) Bootstrap(ctx context.Context, clusterID string) error {
	if r.Bootstrapped() {
		return nil
	}
	key := make([]byte, 36)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	_, err := r.ProposeMeta(ctx, MetaOp{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: clusterID, HandleKey: key}})
	return err
}

// Barrier commits an empty change and waits until it is applied here:
// then every entry committed before it is applied too. A new leader calls
// it before it serves from its store.
func (r *Replica) Barrier(ctx context.Context) error {
	_, err := r.ProposeMeta(ctx, MetaOp{Kind: MetaBarrier})
	return err
}

// Bootstrapped reports whether a bootstrap entry has been applied here.
func (r *Replica) Bootstrapped() bool {
	_, ok, err := r.store.Meta().LoadBlob(clusterBlob)
	return err == nil && ok
}

// applyMeta applies a metadata change. A refusal decided by the change
// itself is the proposer's answer (opErr); any other failure stops the
// replica (err).
func (r *Replica) applyMeta(e *metaEntry) (res storage.AppendResult, opErr error, err error) {
	m := r.store.Meta()
	switch op := e.op; op.Kind {
	case MetaPutTopic:
		opErr = m.PutTopic(*op.Topic)
	case MetaDeleteTopic:
		opErr = m.DeleteTopic(op.Name)
	case MetaPutGroup:
		opErr = m.PutGroup(*op.Group)
	case MetaDeleteGroup:
		opErr = m.DeleteGroup(op.Name)
	case MetaCommitOffset:
		m.CommitOffset(*op.OffsetKey, op.Offset)
	case MetaDropQueues:
		st := storage.Stamp{StoreTime: max(e.storeTime, r.st.storeTime, 1), StoreHost: e.storeHost}
		res, opErr = r.store.DeleteTopicStamped(context.Background(), st, op.Name)
		if opErr == nil {
			r.st.logEnd, r.st.storeTime = res.End, st.StoreTime
		}
	case MetaBootstrap:
		opErr = r.applyBootstrap(op.Bootstrap)
	case MetaBarrier:
	case MetaSetFormat:
		if err := r.applySetFormat(op.Format); err != nil {
			return res, nil, err
		}
	case MetaPutKeys:
		opErr = r.applyPutKeys(op.Keys)
	}
	if opErr != nil && !errors.Is(opErr, storage.ErrInvalid) && !errors.Is(opErr, storage.ErrNotFound) {
		return res, nil, opErr
	}
	if opErr == nil {
		res.Status, res.Durability = storage.StatusOK, storage.DurabilityLocal
	}
	return res, opErr, nil
}

func (r *Replica) applyBootstrap(b *Bootstrap) error {
	m := r.store.Meta()
	have, ok, err := m.LoadBlob(clusterBlob)
	if err != nil {
		return err
	}
	if ok {
		if string(have) != b.ClusterID {
			return fmt.Errorf("cluster: a bootstrap for cluster %q after this store's %q", b.ClusterID, have)
		}
		return nil // the first bootstrap won
	}
	if r.opts.ClusterID != "" && b.ClusterID != r.opts.ClusterID {
		return fmt.Errorf("cluster: the group was bootstrapped as cluster %q; this member is configured for %q", b.ClusterID, r.opts.ClusterID)
	}
	if err := m.SaveBlob(pop.KeyBlob, b.HandleKey); err != nil {
		return err
	}
	return m.SaveBlob(clusterBlob, []byte(b.ClusterID))
}
