package lite

import (
	"sort"
	"sync"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// subscription is one client's lite subscription: one group on one parent.
type subscription struct {
	group, parent string
	set           map[string]struct{}
	// order is set's names in a stable order; receives start at cursor
	// so every subscribed lite topic gets its turn.
	order  []string
	cursor int
}

// registry holds the clients' lite subscriptions, the subscribers of each
// lite topic, and each client's wake-up for its parked receives. mu is
// held only around the maps; notifiers are woken after it is released.
type registry struct {
	mu      sync.Mutex
	clients map[string]*subscription
	// byLite: parent → lite topic → the clients subscribed to it.
	byLite map[string]map[string][]string
	wakes  map[string]*notifier
}

func (r *registry) init() {
	r.clients = map[string]*subscription{}
	r.byLite = map[string]map[string][]string{}
	r.wakes = map[string]*notifier{}
}

// wait returns a channel closed at the client's next wake-up.
func (r *registry) wait(clientID string) <-chan struct{} {
	r.mu.Lock()
	n := r.wakes[clientID]
	if n == nil {
		n = &notifier{}
		n.init()
		r.wakes[clientID] = n
	}
	r.mu.Unlock()
	return n.wait()
}

func (r *registry) wakeClient(clientID string) {
	r.mu.Lock()
	n := r.wakes[clientID]
	r.mu.Unlock()
	if n != nil {
		n.notify()
	}
}

// wakeLites wakes the clients subscribed to any of names on parent.
func (r *registry) wakeLites(parent string, names []string) {
	if len(names) == 0 {
		return
	}
	var ns []*notifier
	r.mu.Lock()
	if m := r.byLite[parent]; m != nil {
		for i, name := range names {
			if i > 0 && name == names[i-1] {
				continue // a batch names one lite topic
			}
			for _, id := range m[name] {
				if n := r.wakes[id]; n != nil {
					ns = append(ns, n)
				}
			}
		}
	}
	r.mu.Unlock()
	for _, n := range ns {
		n.notify()
	}
}

// wakeParent wakes every client subscribed on parent.
func (r *registry) wakeParent(parent string) {
	var ns []*notifier
	r.mu.Lock()
	for id, s := range r.clients {
		if s.parent == parent {
			if n := r.wakes[id]; n != nil {
				ns = append(ns, n)
			}
		}
	}
	r.mu.Unlock()
	for _, n := range ns {
		n.notify()
	}
}

// link and unlink keep byLite in step with a client's set. r.mu held.
func (r *registry) link(parent, name, id string) {
	m := r.byLite[parent]
	if m == nil {
		m = map[string][]string{}
		r.byLite[parent] = m
	}
	m[name] = append(m[name], id)
}

func (r *registry) unlink(parent, name, id string) {
	m := r.byLite[parent]
	ids := m[name]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(m, name)
		if len(m) == 0 {
			delete(r.byLite, parent)
		}
		return
	}
	m[name] = ids
}

// remove forgets a client and wakes its parked receives, which then find
// no subscription.
func (r *registry) remove(clientID string) *subscription {
	r.mu.Lock()
	s := r.clients[clientID]
	delete(r.clients, clientID)
	if s != nil {
		for name := range s.set {
			r.unlink(s.parent, name, clientID)
		}
	}
	n := r.wakes[clientID]
	delete(r.wakes, clientID)
	r.mu.Unlock()
	if n != nil {
		n.notify()
	}
	return s
}

// lites returns the client's lite topics on parent, starting at its cursor.
func (r *registry) lites(clientID, parent string) ([]string, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.clients[clientID]
	if s == nil || s.parent != parent {
		return nil, "", false
	}
	n := len(s.order)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, s.order[(s.cursor+i)%n])
	}
	return out, s.group, true
}

func (r *registry) rotate(clientID string, by int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.clients[clientID]; s != nil && len(s.order) > 0 {
		s.cursor = (s.cursor + by) % len(s.order)
	}
}

// apply changes a client's subscription and returns the lite topics it
// added. A client subscribes one group on one parent: a change naming
// others replaces its subscription.
func (r *registry) apply(req SyncRequest, quota int) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.clients[req.ClientID]
	if cur != nil && (cur.group != req.Group || cur.parent != req.Topic.Name) {
		cur = nil
	}
	if req.Action == CompleteRemove {
		if old := r.clients[req.ClientID]; old != nil {
			for name := range old.set {
				r.unlink(old.parent, name, req.ClientID)
			}
		}
		delete(r.clients, req.ClientID)
		return nil, nil
	}
	next := map[string]struct{}{}
	if cur != nil && req.Action != CompleteAdd {
		for n := range cur.set {
			next[n] = struct{}{}
		}
	}
	var added []string
	switch req.Action {
	case PartialAdd, CompleteAdd:
		for _, n := range req.Lites {
			if _, ok := next[n]; !ok {
				next[n] = struct{}{}
			}
			if cur == nil {
				added = append(added, n)
			} else if _, had := cur.set[n]; !had {
				added = append(added, n)
			}
		}
	case PartialRemove:
		for _, n := range req.Lites {
			delete(next, n)
		}
	default:
		return nil, mqerr.Errorf(mqerr.KindBadRequest, "unknown lite subscription action %d", req.Action)
	}
	if len(next) > quota {
		return nil, mqerr.Errorf(mqerr.KindLiteSubscriptionQuota, "a lite subscription may hold %d lite topics; this change makes it %d", quota, len(next))
	}
	order := make([]string, 0, len(next))
	for n := range next {
		order = append(order, n)
	}
	sort.Strings(order)
	s := &subscription{group: req.Group, parent: req.Topic.Name, set: next, order: order}
	if cur != nil && len(order) > 0 {
		s.cursor = cur.cursor % len(order)
	}
	if old := r.clients[req.ClientID]; old != nil {
		for name := range old.set {
			if _, keep := next[name]; !keep || old.parent != s.parent {
				r.unlink(old.parent, name, req.ClientID)
			}
		}
	}
	for name := range next {
		if old := r.clients[req.ClientID]; old == nil || old.parent != s.parent {
			r.link(s.parent, name, req.ClientID)
		} else if _, had := old.set[name]; !had {
			r.link(s.parent, name, req.ClientID)
		}
	}
	r.clients[req.ClientID] = s
	return added, nil
}

// dropLites removes expired lite topics of parent from every subscription
// and returns one notice per client that had one.
func (r *registry) dropLites(parent string, gone map[string]bool) []Unsubscribed {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Unsubscribed
	for id, s := range r.clients {
		if s.parent != parent {
			continue
		}
		changed := false
		for n := range s.set {
			if gone[n] {
				delete(s.set, n)
				r.unlink(parent, n, id)
				changed = true
				out = append(out, Unsubscribed{ClientID: id, Group: s.group, Parent: parent, Lite: n})
			}
		}
		if changed {
			order := s.order[:0:0]
			for _, n := range s.order {
				if !gone[n] {
					order = append(order, n)
				}
			}
			s.order, s.cursor = order, 0
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ClientID != out[j].ClientID {
			return out[i].ClientID < out[j].ClientID
		}
		return out[i].Lite < out[j].Lite
	})
	return out
}

// Subscribed returns each client's subscribed lite topics on parent
// (client id → sorted names), for the admin views.
func (s *Service) Subscribed(parent string) map[string][]string {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	out := map[string][]string{}
	for id, sub := range s.subs.clients {
		if sub.parent == parent {
			out[id] = append([]string(nil), sub.order...)
		}
	}
	return out
}
