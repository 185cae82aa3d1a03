package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// The catalog (topics, consumer groups) of a cluster of several data
// groups lives in group 0: a member that does not lead it forwards each
// change to its leader and waits until its own replica applied it.
// TestClusterDataGroupsCatalogLeaderKilled kills that leader while
// changes are under way.

// outcome is how a catalog change was answered.
type outcome int

const (
	answeredOK outcome = iota
	// refused: the server answered another error (bad request, already
	// exists, ...); the change may have been made all the same.
	refused
	// ambiguous: no answer (the member went away, the call timed out) or
	// one saying the outcome is unknown (UNAVAILABLE).
	ambiguous
)

func (o outcome) String() string {
	return [...]string{"ok", "refused", "ambiguous"}[o]
}

// classify reads the outcome of an admin call's error.
func classify(err error) outcome {
	switch status.Code(err) {
	case codes.OK:
		return answeredOK
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		return ambiguous
	}
	return refused
}

// creation is one topic and its consumer group, created through one
// member while the catalog's leader may be killed.
type creation struct {
	topic, group string
	via          int // member index
	started      time.Time
	topicOut     outcome
	groupOut     outcome
	topicErr     error
	groupErr     error
	answered     time.Time
	took         time.Duration // the longer of the two calls
	// unseen: what the member that answered OK did not list right after.
	unseen []string
}

// notListed lists the topics (or the consumer groups) through adm and
// says so when name is not among them: a member answers a catalog
// change OK once its own replica of the catalog holds it. A member that
// does not answer (killed meanwhile) says nothing.
func notListed(adm adminv1.AdminServiceClient, name string, group bool) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	if group {
		gs, err := adm.ListGroups(ctx, &adminv1.ListGroupsRequest{})
		if err != nil {
			return nil
		}
		for _, g := range gs.GetGroups() {
			names = append(names, g.GetName())
		}
	} else {
		ts, err := adm.ListTopics(ctx, &adminv1.ListTopicsRequest{})
		if err != nil {
			return nil
		}
		for _, t := range ts.GetTopics() {
			names = append(names, t.GetName())
		}
	}
	if slices.Contains(names, name) {
		return nil
	}
	return []string{name}
}

// catalogChurn creates topics and consumer groups from several
// goroutines, each creation through the next member in turn, one per
// permit given (give): the test decides how many are made around each
// kill, and the verification afterwards stays bounded.
type catalogChurn struct {
	admins  []adminv1.AdminServiceClient // by member index
	queues  int32
	permits chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	given   atomic.Int64
	started atomic.Int64

	mu   sync.Mutex
	made []*creation
	// waiters are closed once that many creations started (whenStarted).
	waiters map[int64]chan struct{}
}

// catalogCallTimeout bounds one admin call: a catalog change is bounded
// by the server (a forwarded change waits at most 10 s for group 0's
// leader and its application here); one not answered in this much longer
// time hangs.
const catalogCallTimeout = 30 * time.Second

func (c *catalogChurn) run(creators int, base string) {
	for i := range creators {
		c.wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-c.permits:
				case <-c.stop:
					return
				}
				c.startedOne()
				name := fmt.Sprintf("%s-%d-%d", base, i, j)
				cr := &creation{topic: name, group: name + "-cg", via: (i + j) % len(c.admins), started: time.Now()}
				adm := c.admins[cr.via]
				ctx, cancel := context.WithTimeout(context.Background(), catalogCallTimeout)
				_, cr.topicErr = adm.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: cr.topic, Type: "FIFO", Queues: c.queues})
				cancel()
				cr.took = time.Since(cr.started)
				cr.topicOut = classify(cr.topicErr)
				if cr.topicOut == answeredOK {
					cr.unseen = append(cr.unseen, notListed(adm, cr.topic, false)...)
				}
				mid := time.Now()
				ctx, cancel = context.WithTimeout(context.Background(), catalogCallTimeout)
				_, cr.groupErr = adm.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: cr.group})
				cancel()
				cr.answered = time.Now()
				cr.took = max(cr.took, cr.answered.Sub(mid))
				cr.groupOut = classify(cr.groupErr)
				if cr.groupOut == answeredOK {
					cr.unseen = append(cr.unseen, notListed(adm, cr.group, true)...)
				}
				c.mu.Lock()
				c.made = append(c.made, cr)
				c.mu.Unlock()
			}
		})
	}
}

// startedOne counts a creation started and wakes whoever waits for it.
func (c *catalogChurn) startedOne() {
	n := c.started.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	for at, ch := range c.waiters {
		if at <= n {
			close(ch)
			delete(c.waiters, at)
		}
	}
}

// whenStarted returns a channel closed once n creations have started:
// the moment a creator takes its permit, so that what is done then (a
// kill) finds creations under way.
func (c *catalogChurn) whenStarted(n int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.started.Load() >= n {
		close(ch)
		return ch
	}
	if c.waiters == nil {
		c.waiters = map[int64]chan struct{}{}
	}
	if w, ok := c.waiters[n]; ok {
		return w
	}
	c.waiters[n] = ch
	return ch
}

// give lets n more creations start.
func (c *catalogChurn) give(n int) {
	for range n {
		c.permits <- struct{}{}
	}
	c.given.Add(int64(n))
}

// idle reports whether every creation given was answered.
func (c *catalogChurn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.made)) == c.given.Load()
}

// okSince counts the creations started after at whose topic was answered
// OK.
func (c *catalogChurn) okSince(at time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, cr := range c.made {
		if cr.started.After(at) && cr.topicOut == answeredOK {
			n++
		}
	}
	return n
}

// finish stops the creators (idle: every creation given was answered)
// and returns the creations.
func (c *catalogChurn) finish() []*creation {
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.made)
}

// adminClients dials every member's admin API (by member index).
func (g *group) adminClients() []adminv1.AdminServiceClient {
	g.t.Helper()
	var out []adminv1.AdminServiceClient
	for _, m := range g.members {
		conn, err := grpc.NewClient(m.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			g.t.Fatal(err)
		}
		g.t.Cleanup(func() { conn.Close() })
		out = append(out, adminv1.NewAdminServiceClient(conn))
	}
	return out
}

// catalogOf is a member's catalog as its admin API lists it: one line per
// topic and per consumer group, sorted.
func catalogOf(adm adminv1.AdminServiceClient) (topics, groups []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts, err := adm.ListTopics(ctx, &adminv1.ListTopicsRequest{})
	if err != nil {
		return nil, nil, err
	}
	for _, t := range ts.GetTopics() {
		topics = append(topics, fmt.Sprintf("%s %s %d %d", t.GetName(), t.GetType(), t.GetQueues(), t.GetCreateTime().AsTime().UnixMilli()))
	}
	gs, err := adm.ListGroups(ctx, &adminv1.ListGroupsRequest{})
	if err != nil {
		return nil, nil, err
	}
	for _, cg := range gs.GetGroups() {
		groups = append(groups, fmt.Sprintf("%s %v %d %d", cg.GetName(), cg.GetFifo(), cg.GetMaxDeliveryAttempts(), cg.GetCreateTime().AsTime().UnixMilli()))
	}
	slices.Sort(topics)
	slices.Sort(groups)
	return topics, groups, nil
}

// agreedCatalog waits until every member lists the same topics and
// consumer groups, and returns them (name → listed line).
func (g *group) agreedCatalog(admins []adminv1.AdminServiceClient, timeout time.Duration) (topics, groups map[string]string) {
	g.t.Helper()
	var last []string
	ok := waitFor(timeout, func() bool {
		last = last[:0]
		var refT, refG []string
		for i, adm := range admins {
			ts, gs, err := catalogOf(adm)
			if err != nil {
				last = append(last, fmt.Sprintf("member %d: %v", i+1, err))
				return false
			}
			last = append(last, fmt.Sprintf("member %d: %d topics, %d groups", i+1, len(ts), len(gs)))
			if i == 0 {
				refT, refG = ts, gs
				continue
			}
			if !slices.Equal(ts, refT) || !slices.Equal(gs, refG) {
				last = append(last, fmt.Sprintf("member %d's catalog differs from member 1's:\n%s", i+1, catalogDiff(refT, ts)+catalogDiff(refG, gs)))
				return false
			}
		}
		topics, groups = byName(refT), byName(refG)
		return true
	})
	if !ok {
		g.t.Fatalf("the members' catalogs did not agree within %v:\n%s", timeout, strings.Join(last, "\n"))
	}
	return topics, groups
}

// catalogDiff lists what one of two sorted lists has and the other lacks.
func catalogDiff(a, b []string) string {
	var out strings.Builder
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			fmt.Fprintf(&out, "  only member 1: %s\n", x)
		}
	}
	for _, x := range b {
		if _, ok := slices.BinarySearch(a, x); !ok {
			fmt.Fprintf(&out, "  only the other: %s\n", x)
		}
	}
	return out.String()
}

func byName(lines []string) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		name, _, _ := strings.Cut(l, " ")
		out[name] = l
	}
	return out
}

// catalogLedBy waits until the running members agree that a member
// other than gone leads group 0 (the catalog).
func (g *group) catalogLedBy(gone *member, timeout time.Duration) {
	g.t.Helper()
	var seen []string
	if !waitFor(timeout, func() bool {
		seen = seen[:0]
		leader := -1
		for _, m := range g.others(gone) {
			l := g.groupLeaders(m, 1)[0] // group 0's alone
			seen = append(seen, fmt.Sprintf("member %d: %d", m.id, l))
			if l == 0 || l == gone.id || (leader >= 0 && l != leader) {
				return false
			}
			leader = l
		}
		return true
	}) {
		g.t.Fatalf("group 0 had no leader but member %d within %v (leaders seen: %v)", gone.id, timeout, seen)
	}
}

// messageGroupsByQueue names, for each queue of a FIFO topic of queues
// queues, a message group whose messages go to it.
func messageGroupsByQueue(queues int) []string {
	out := make([]string, queues)
	found := 0
	for k := 0; found < queues; k++ {
		mg := fmt.Sprintf("mg-%d", k)
		if q := fnvHash(mg) % uint32(queues); out[q] == "" {
			out[q] = mg
			found++
		}
	}
	return out
}

// TestClusterDataGroupsCatalogLeaderKilled: with --data-groups 3, three
// goroutines create FIFO topics of six queues (every topic spans the three
// groups) and consumer groups through every member, while the member
// leading group 0 (the catalog) is killed with kill -9 and restarted,
// round after round. Afterwards, on every member alike: each topic or
// consumer group answered OK exists whole; one refused or left without an
// answer exists whole or not at all, and creating it again then works;
// the members list the same catalog; and a message sent to each queue of
// each topic is stored there and received through its consumer group.
func TestClusterDataGroupsCatalogLeaderKilled(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	began := time.Now()
	// No auto-create: a topic or consumer group exists only if a creation
	// made it.
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "", "--auto-create=false")
	catalogLeaderKilled(t, g, began, func(d time.Duration) []int { return g.balanced(groups, d) })
}

// TestClusterReplicaSetsCatalogLeaderKilled is
// TestClusterDataGroupsCatalogLeaderKilled on five members with replica
// sets (--data-groups 6 --group-replicas 3): group 0, the catalog, is on
// all five and holds no queue; each topic's six queues are spread over
// five data groups of three replicas.
func TestClusterReplicaSetsCatalogLeaderKilled(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 6
	began := time.Now()
	g := newGroupOf(t, 5, "--data-groups", strconv.Itoa(groups), "--group-replicas", "3", "--remoting-addr", "", "--auto-create=false")
	catalogLeaderKilled(t, g, began, func(d time.Duration) []int { return g.balancedData(groups, d) })
}

// catalogLeaderKilled is the body of the catalog leader kill tests, on
// g, started at began; balanced waits (up to its argument) until the
// leaderships are spread and returns each group's leader.
func catalogLeaderKilled(t *testing.T, g *group, began time.Time, balanced func(time.Duration) []int) {
	t.Helper()
	const (
		queues   = 6
		rounds   = 4
		creators = 3
	)
	leaders := balanced(60 * time.Second)
	admins := g.adminClients()
	churn := &catalogChurn{admins: admins, queues: queues, permits: make(chan struct{}, 1024), stop: make(chan struct{})}
	churn.run(creators, e2eutil.Uniq("cat"))
	defer func() {
		select {
		case <-churn.stop:
		default:
			close(churn.stop)
		}
	}()

	t.Logf("cluster up, leaders %v, after %v", leaders, time.Since(began).Round(time.Millisecond))
	for r := range rounds {
		roundAt := time.Now()
		victim := g.byID(leaders[0])
		before := churn.started.Load()
		under := churn.whenStarted(before + 2*creators)
		churn.give(4 * creators)
		// Killed while the creators are busy: creations under way through
		// it, and forwarded to it, when the catalog's leader goes.
		select {
		case <-under:
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: the creations did not start", r)
		}
		victim.proc.Kill9()
		killed := time.Now()
		// Creations while group 0 elects a leader among the others ...
		churn.give(creators)
		if !waitFor(60*time.Second, churn.idle) {
			t.Fatalf("round %d: creations still unanswered 60 s after killing member %d", r, victim.id)
		}
		g.catalogLedBy(victim, 60*time.Second)
		// ... and once it has one: creations through the other members
		// are answered OK again.
		churn.give(creators)
		extra := 0
		if !waitFor(60*time.Second, func() bool {
			if churn.okSince(killed) > 0 {
				return true
			}
			if churn.idle() && extra < 10 {
				churn.give(creators)
				extra++
			}
			return false
		}) {
			t.Fatalf("round %d: no creation through the other members answered OK within 60 s of killing member %d, which led group 0", r, victim.id)
		}
		resumed := time.Since(killed)
		churn.give(creators)
		g.start(victim)
		churn.give(creators)
		leaders = balanced(90 * time.Second)
		if !waitFor(90*time.Second, churn.idle) {
			t.Fatalf("round %d: creations still unanswered 90 s after the leaders spread again", r)
		}
		t.Logf("round %d (%v): killed member %d (leader of group 0); creations answered OK again after %v; leaders now %v",
			r, time.Since(roundAt).Round(time.Millisecond), victim.id, resumed.Round(time.Millisecond), leaders)
	}
	made := churn.finish()
	churned := time.Now()

	count := map[string]int{}
	var slowest time.Duration
	for _, cr := range made {
		count["topic "+cr.topicOut.String()]++
		count["group "+cr.groupOut.String()]++
		slowest = max(slowest, cr.took)
		if cr.took >= catalogCallTimeout {
			t.Errorf("creating %s through member %d was not answered within %v (topic: %v; group: %v)", cr.topic, cr.via+1, catalogCallTimeout, cr.topicErr, cr.groupErr)
		}
		if len(cr.unseen) > 0 {
			t.Errorf("member %d answered the creation of %v OK and did not list it right after", cr.via+1, cr.unseen)
		}
		if cr.topicOut != answeredOK {
			t.Logf("topic %s through member %d: %s: %v", cr.topic, cr.via+1, cr.topicOut, cr.topicErr)
		}
		if cr.groupOut != answeredOK {
			t.Logf("group %s through member %d: %s: %v", cr.group, cr.via+1, cr.groupOut, cr.groupErr)
		}
	}
	t.Logf("%d creations of a topic and a consumer group: %v; slowest answer %v", len(made), count, slowest.Round(time.Millisecond))
	if count["topic ok"] == 0 || count["topic ok"] == len(made) {
		t.Fatalf("outcomes %v: the test needs creations answered OK and creations not", count)
	}

	// The catalogs agree; what was answered OK is in them whole; what was
	// not is in them whole or not at all.
	topics, cgs := g.agreedCatalog(admins, 60*time.Second)
	wantTopic := func(name string) string {
		return fmt.Sprintf("%s FIFO %d", name, queues)
	}
	var again []*creation
	madeAnyway := 0 // changes not answered OK, found made
	for _, cr := range made {
		line, there := topics[cr.topic]
		if there && !strings.HasPrefix(line, wantTopic(cr.topic)+" ") {
			t.Errorf("topic %s (%s through member %d) is listed as %q, want FIFO with %d queues", cr.topic, cr.topicOut, cr.via+1, line, queues)
		}
		if cr.topicOut == answeredOK && !there {
			t.Errorf("topic %s was answered OK through member %d and no member lists it", cr.topic, cr.via+1)
		}
		gline, gthere := cgs[cr.group]
		if gthere && !strings.HasPrefix(gline, cr.group+" false ") {
			t.Errorf("consumer group %s (%s through member %d) is listed as %q", cr.group, cr.groupOut, cr.via+1, gline)
		}
		if cr.groupOut == answeredOK && !gthere {
			t.Errorf("consumer group %s was answered OK through member %d and no member lists it", cr.group, cr.via+1)
		}
		if cr.topicOut != answeredOK && there {
			madeAnyway++
		}
		if cr.groupOut != answeredOK && gthere {
			madeAnyway++
		}
		if cr.topicOut != answeredOK || cr.groupOut != answeredOK {
			again = append(again, cr)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d changes not answered OK were made all the same", madeAnyway)

	// Created again (already there or not), each is then there whole.
	for i, cr := range again {
		adm := admins[i%len(admins)]
		if cr.topicOut != answeredOK {
			ctx, cancel := context.WithTimeout(context.Background(), catalogCallTimeout)
			_, err := adm.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: cr.topic, Type: "FIFO", Queues: queues})
			cancel()
			if err != nil && status.Code(err) != codes.AlreadyExists {
				t.Fatalf("creating topic %s again through member %d (first %s: %v): %v", cr.topic, i%len(admins)+1, cr.topicOut, cr.topicErr, err)
			}
		}
		if cr.groupOut != answeredOK {
			ctx, cancel := context.WithTimeout(context.Background(), catalogCallTimeout)
			_, err := adm.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: cr.group})
			cancel()
			if err != nil && status.Code(err) != codes.AlreadyExists {
				t.Fatalf("creating consumer group %s again through member %d (first %s: %v): %v", cr.group, i%len(admins)+1, cr.groupOut, cr.groupErr, err)
			}
		}
	}
	topics, cgs = g.agreedCatalog(admins, 60*time.Second)
	a := g.acker()
	for _, cr := range made {
		if !strings.HasPrefix(topics[cr.topic], wantTopic(cr.topic)+" ") || !strings.HasPrefix(cgs[cr.group], cr.group+" false ") {
			t.Fatalf("after creating them again: topic %s listed as %q, consumer group %s as %q", cr.topic, topics[cr.topic], cr.group, cgs[cr.group])
		}
		for i, adm := range admins {
			if err := wholeThrough(adm, a, i, cr, queues); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A message to each queue of each topic (its message group hashes
	// there), stored in that queue as every member describes it, and
	// received through the topic's consumer group.
	mgs := messageGroupsByQueue(queues)
	var names []string
	for _, cr := range made {
		names = append(names, cr.topic)
	}
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(names...))
	for _, cr := range made {
		for q, mg := range mgs {
			m := &rmq.Message{Topic: cr.topic, Body: []byte(fmt.Sprintf("%s/%d", cr.topic, q))}
			m.SetMessageGroup(mg)
			sendOK(t, pr, m, 30*time.Second)
		}
	}
	for _, cr := range made {
		for i, adm := range admins {
			var d *adminv1.DescribeTopicResponse
			var err error
			stored := func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				d, err = adm.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: cr.topic})
				if err != nil || len(d.GetQueues()) != queues {
					return false
				}
				for _, qo := range d.GetQueues() {
					if qo.GetMaxOffset()-qo.GetMinOffset() < 1 { // a send retried may be there twice
						return false
					}
				}
				return true
			}
			if !waitFor(30*time.Second, stored) {
				t.Fatalf("topic %s (%s) described through member %d: %v (%v); want a message in each of %d queues", cr.topic, cr.topicOut, i+1, d, err, queues)
			}
		}
	}
	if errs := receiveEach(g, made, queues, 4); len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	t.Logf("cluster up and churn %v, verification %v; %d topics and consumer groups checked on every member, %d messages received",
		churned.Sub(began).Round(time.Second), time.Since(churned).Round(time.Second), len(made), len(made)*queues)
}

// wholeThrough checks, through member i, that cr's topic exists with its
// queues (its catalog entry and its route name them all) and that cr's
// consumer group exists.
func wholeThrough(adm adminv1.AdminServiceClient, a *acker, i int, cr *creation, queues int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := adm.GetTopic(ctx, &adminv1.GetTopicRequest{Name: cr.topic})
	if err != nil || tr.GetTopic().GetQueues() != queues {
		return fmt.Errorf("topic %s (%s) through member %d: %v (%v)", cr.topic, cr.topicOut, i+1, tr, err)
	}
	if _, err := adm.GetGroup(ctx, &adminv1.GetGroupRequest{Name: cr.group}); err != nil {
		return fmt.Errorf("consumer group %s (%s) through member %d: %v", cr.group, cr.groupOut, i+1, err)
	}
	mqs, err := a.route(ctx, i, cr.topic, "JAVA")
	if err != nil {
		return fmt.Errorf("route of topic %s (%s) through member %d: %v", cr.topic, cr.topicOut, i+1, err)
	}
	var ids, want []int32
	for _, mq := range mqs {
		ids = append(ids, mq.GetId())
	}
	for q := range queues {
		want = append(want, q)
	}
	if slices.Sort(ids); !slices.Equal(ids, want) {
		return fmt.Errorf("route of topic %s (%s) through member %d names queues %v, want %v", cr.topic, cr.topicOut, i+1, ids, want)
	}
	return nil
}

// receiveEach receives each creation's topic through its consumer group
// with the official client, workers at a time, until the message sent to
// each of its queues came; it returns what went wrong.
func receiveEach(g *group, made []*creation, queues, workers int) []error {
	work := make(chan *creation)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for cr := range work {
				if err := receiveAll(g, cr, queues); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, cr := range made {
		work <- cr
	}
	close(work)
	wg.Wait()
	return errs
}

// receiveAll receives cr's topic through cr's consumer group until the
// message of each of its queues came (acknowledging each).
func receiveAll(g *group, cr *creation, queues int) error {
	c, err := rmq.NewSimpleConsumer(config(g, cr.group), rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{cr.topic: rmq.SUB_ALL}))
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("consumer of %s through group %s: %w", cr.topic, cr.group, err)
	}
	defer func() { _ = c.GracefulStop() }()
	got := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < queues && time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(rctx, 32, 30*time.Second)
		cancel()
		if err != nil {
			backoff(err)
			continue
		}
		for _, mv := range mvs {
			got[string(mv.GetBody())] = true
			actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.Ack(actx, mv)
			acancel()
		}
	}
	for q := range queues {
		if body := fmt.Sprintf("%s/%d", cr.topic, q); !got[body] {
			return fmt.Errorf("topic %s (%s), consumer group %s (%s): the message sent to queue %d was not received (%d of %d)",
				cr.topic, cr.topicOut, cr.group, cr.groupOut, q, len(got), queues)
		}
	}
	return nil
}
