package peer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/broker/raftstore"
)

// The address book: where this member dials each other member. Two
// sources, the first winning for the ids it names:
//
//   - Config.Peers, this member's own configuration (--peers). Each
//     member may reach the others by addresses of its own (a sidecar
//     proxy, another network), so these are never replicated.
//   - The addresses members were added with: every configuration change
//     that adds a member carries its peer address (changeContext), the
//     group's first members' included (Bootstrap). They are kept in
//     Config.MembersFile, written on each change applied, because the
//     raft log that held the change is compacted away later; a raft
//     snapshot carries them too (its Data), for a member that installs
//     one.
//
// The book also keeps the ids removed from the group: they are never
// added again (raft ids are not reusable), their messages are refused
// (which tells a removed member that it was removed), and this member
// stops dialling them.
//
// A change is made to the book in memory, then saved. A save that fails
// for lack of disk space (raftstore.ErrNoSpace) leaves the change in
// memory: saving again is all that is left of it (Node.bookSaved).

// changeContext is the Context of a configuration change adding a member.
type changeContext struct {
	Peer string `json:"peer"`
}

// bookFile is the members file's content and a raft snapshot's Data.
type bookFile struct {
	// Index is the last configuration change applied into the book.
	Index   uint64            `json:"index"`
	Addrs   map[uint64]string `json:"addrs"`
	Removed []uint64          `json:"removed,omitempty"`
}

type book struct {
	path  string
	local map[uint64]string // Config.Peers

	mu      sync.RWMutex
	index   uint64
	addrs   map[uint64]string // replicated
	removed map[uint64]bool
	// learned: where the running members dial the members neither of the
	// others names, as a joining member asked them (learnMembers; not
	// saved).
	learned map[uint64]string

	// failWrite, set by tests, fails the file's writes with the error it
	// returns, as the file system would (nil: none).
	failWrite atomic.Pointer[func() error]
}

func openBook(path string, local map[uint64]string) (*book, error) {
	b := &book{path: path, local: maps.Clone(local), addrs: map[uint64]string{}, removed: map[uint64]bool{}}
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("peer: members file: %w", err)
	}
	var f bookFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("peer: members file %s: %w", path, err)
	}
	b.load(f)
	return b, nil
}

func (b *book) load(f bookFile) {
	b.index = f.Index
	b.addrs = maps.Clone(f.Addrs)
	if b.addrs == nil {
		b.addrs = map[uint64]string{}
	}
	b.removed = map[uint64]bool{}
	for _, id := range f.Removed {
		b.removed[id] = true
	}
}

func (b *book) file() bookFile {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return bookFile{Index: b.index, Addrs: maps.Clone(b.addrs), Removed: slices.Sorted(maps.Keys(b.removed))}
}

// addr is where to dial member id ("" when unknown).
func (b *book) addr(id uint64) string {
	if a, ok := b.local[id]; ok {
		return a
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if a, ok := b.addrs[id]; ok {
		return a
	}
	return b.learned[id]
}

// learn records where the running members dial member id, when this
// member knows no address of it; it reports whether it did.
func (b *book) learn(id uint64, addr string) bool {
	if _, ok := b.local[id]; ok || addr == "" {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.addrs[id]; ok || b.learned[id] == addr {
		return false
	}
	if b.learned == nil {
		b.learned = map[uint64]string{}
	}
	b.learned[id] = addr
	return true
}

// isRemoved reports whether member id was removed from the group.
func (b *book) isRemoved(id uint64) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.removed[id]
}

// dialable is every member this one may dial (other than self): the ids
// with an address, less the removed ones.
func (b *book) dialable(self uint64) map[uint64]string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := maps.Clone(b.learned)
	if out == nil {
		out = map[uint64]string{}
	}
	maps.Copy(out, b.addrs)
	maps.Copy(out, b.local)
	for id := range out {
		if id == self || b.removed[id] {
			delete(out, id)
		}
	}
	return out
}

// apply records configuration change cc, applied at index, and saves
// the book; a change at or below the book's index (read again from the
// raft log on restart) is already in it. It reports whether the book
// changed.
func (b *book) apply(index uint64, cc *raftpb.ConfChangeV2) (bool, error) {
	b.mu.Lock()
	if index <= b.index {
		b.mu.Unlock()
		return false, nil
	}
	var peer string
	if len(cc.GetContext()) > 0 {
		var c changeContext
		if err := json.Unmarshal(cc.GetContext(), &c); err == nil {
			peer = c.Peer
		}
	}
	for _, ch := range cc.GetChanges() {
		id := ch.GetNodeId()
		switch ch.GetType() {
		case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
			if peer != "" && len(cc.GetChanges()) == 1 {
				b.addrs[id] = peer
			}
		case raftpb.ConfChangeType_ConfChangeRemoveNode:
			delete(b.addrs, id)
			b.removed[id] = true
		}
	}
	b.index = index
	b.mu.Unlock()
	return true, b.save()
}

// markRemoved records that member id was removed (another member said
// so) and saves the book.
func (b *book) markRemoved(id uint64) error {
	b.mu.Lock()
	b.removed[id] = true
	b.mu.Unlock()
	return b.save()
}

// restore replaces the book with a raft snapshot's, when that is newer.
func (b *book) restore(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var f bookFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("peer: the snapshot's members: %w", err)
	}
	b.mu.Lock()
	if f.Index <= b.index {
		b.mu.Unlock()
		return nil
	}
	b.load(f)
	b.mu.Unlock()
	return b.save()
}

// save writes the book to its file: a temporary file, fsynced, renamed
// over it, and the directory fsynced.
func (b *book) save() error {
	raw, err := json.Marshal(b.file())
	if err != nil {
		return err
	}
	tmp := b.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fileErr(err)
	}
	_, err = f.Write(raw)
	if p := b.failWrite.Load(); p != nil && err == nil {
		err = (*p)()
	}
	if err != nil {
		f.Close()
		return fileErr(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fileErr(err)
	}
	if err := f.Close(); err != nil {
		return fileErr(err)
	}
	if err := os.Rename(tmp, b.path); err != nil {
		return fileErr(err)
	}
	d, err := os.Open(filepath.Dir(b.path))
	if err != nil {
		return fileErr(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fileErr(err)
	}
	return nil
}

// fileErr is an error writing the members file. One for lack of disk
// space (ENOSPC, or EDQUOT: the quota) wraps raftstore.ErrNoSpace, as the
// store's do.
func fileErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("peer: members file: %w: %w", raftstore.ErrNoSpace, err)
	}
	return fmt.Errorf("peer: members file: %w", err)
}

// bookSaved is the error of a change to the book (apply, restore,
// markRemoved): one for lack of disk space waits until the file is saved
// (awaitSpace; what names the change). Called by the raft loop.
func (n *Node) bookSaved(err error, what string) error {
	if !errors.Is(err, raftstore.ErrNoSpace) {
		return err
	}
	return n.awaitSpace("record "+what+" in the members file", err, n.book.save)
}

// WasRemoved reports whether the address book in membersFile (a group's
// Group.MembersFile) records that member id was removed from the group;
// false when there is no such file.
func WasRemoved(membersFile string, id uint64) (bool, error) {
	b, err := openBook(membersFile, nil)
	if err != nil {
		return false, err
	}
	return b.isRemoved(id), nil
}

// knows reports whether id is a member this one knows of: in its own
// --peers, added by the group (the book), in the configuration it
// applied, or removed from the group.
func (n *Node) knows(id uint64) bool {
	return n.book.addr(id) != "" || n.book.isRemoved(id) || n.Members().includes(id)
}
