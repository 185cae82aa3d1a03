package lite

import (
	"sort"
	"time"
)

// GroupBacklog is one group's progress on a lite topic.
type GroupBacklog struct {
	Group string
	// Consumed is the lite offset of the first message not acknowledged.
	Consumed int64
	// Ready messages wait to go out; InFlight went out unacknowledged.
	Ready, InFlight int64
}

// Info describes one lite topic.
type Info struct {
	Name  string
	Queue int32
	// MinOffset and MaxOffset are the lite offsets of the oldest message
	// kept and past the newest.
	MinOffset, MaxOffset int64
	// LastStored is the store time of the newest message (or of the send
	// that created the lite topic).
	LastStored time.Time
	// ExpiresAt is when it expires unless a message arrives (zero: never).
	ExpiresAt time.Time
	Groups    []GroupBacklog
	// Subscribers are the clients subscribed to it.
	Subscribers []string
}

// Page is one page of a parent's lite topics, in name order.
type Page struct {
	Topics []Info
	// Total is the parent's lite topic count.
	Total int
	// Next is the name to pass as after for the next page ("" at the end).
	Next string
}

// List returns up to limit lite topics of parent named after after (all
// when prefix is "", else those starting with it).
func (s *Service) List(parent, prefix, after string, limit int) Page {
	if limit <= 0 {
		limit = 100
	}
	p := s.existing(parent)
	if p == nil {
		return Page{}
	}
	subs := map[string][]string{}
	for id, names := range s.Subscribed(parent) {
		for _, n := range names {
			subs[n] = append(subs[n], id)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = s.catchUp(p)
	names := make([]string, 0, len(p.lites))
	for n := range p.lites {
		if n > after && (prefix == "" || len(n) >= len(prefix) && n[:len(prefix)] == prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	page := Page{Total: len(p.lites)}
	if len(names) > limit {
		names = names[:limit]
		page.Next = names[limit-1]
	}
	ttl := p.ttlSeconds()
	for _, n := range names {
		lt := p.lites[n]
		in := Info{Name: n, Queue: lt.queue, MinOffset: lt.base, MaxOffset: lt.maxOffset(),
			LastStored: time.Unix(int64(lt.last), 0).UTC()}
		if ttl > 0 {
			in.ExpiresAt = time.Unix(int64(lt.last)+int64(ttl), 0).UTC()
		}
		for _, pr := range lt.groups {
			ready, inFlight := lt.backlog(pr)
			in.Groups = append(in.Groups, GroupBacklog{Group: pr.group, Consumed: lt.liteOffset(pr.next), Ready: ready, InFlight: inFlight})
		}
		sort.Slice(in.Groups, func(i, j int) bool { return in.Groups[i].Group < in.Groups[j].Group })
		in.Subscribers = subs[n]
		sort.Strings(in.Subscribers)
		page.Topics = append(page.Topics, in)
	}
	return page
}

// Counts returns the number of lite topics of parent and their messages
// kept in memory.
func (s *Service) Counts(parent string) (topics int, messages int64) {
	p := s.existing(parent)
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lt := range p.lites {
		messages += int64(len(lt.msgs))
	}
	return len(p.lites), messages
}
