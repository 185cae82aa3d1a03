package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/gateway/peer"
)

const clusterUsage = `Usage:
  mqgate cluster status --peer HOST:PORT --cluster-id ID [--group G] [--json]
  mqgate cluster transfer-leader --peer HOST:PORT --cluster-id ID --to N [--group G]
  mqgate cluster add-node --peer HOST:PORT --cluster-id ID --node-id N --node-peer HOST:PORT [--replaces M]
  mqgate cluster remove-node --peer HOST:PORT --cluster-id ID --node-id N
  mqgate cluster move-replica --peer HOST:PORT --cluster-id ID --group G --from N --to M
  mqgate cluster rebalance --peer HOST:PORT --cluster-id ID
  mqgate cluster init-certs DIR [--node-ids 1,2,3] [--valid DURATION]

All but init-certs talk to a member of a replicated broker set over its
peer port (the raft transport between members). The peer port admits a
caller only with the members' peer token (when they run with one) and
their cluster id; members that run with peer TLS accept only a caller
with a certificate of their peer CA, so give the command one
(--peer-tls-*). Requests that change the group go to the leader, found
through the --peer member when that one does not lead.

  status            the member's term, the leader, its commit and applied
                    indexes, and each member's id, peer address, role and
                    (as the leader sees it) log progress
  transfer-leader   hand the leadership to member N and wait until it
                    leads
  add-node          add member N, started with --join and reachable at
                    --node-peer: it joins as a learner, receives the log
                    (or a copy of a store), and is promoted to voter once
                    it has caught up; waits for the promotion. With
                    data groups it does so in every group, group 0
                    first. In a cluster whose data groups are on some
                    members only (--group-replicas), N joins group 0
                    and the data groups it chose when it started,
                    taking replicas from the members holding the most:
                    in each, the voter holding the most leaves once N
                    votes. With --replaces M, member N, started with
                    --join --replaces M, takes M's place instead: it
                    joins group 0, then each of M's data groups, where
                    M is removed as soon as N votes, and M leaves group
                    0 last. M may be down, its data lost. Run it again
                    after a timeout: it resumes.
  remove-node       remove member N (a leader hands its leadership over
                    first; with data groups from every group, group 0
                    last); the removed member stops. Its id is never
                    used again: a replacement joins under a new id. In
                    a cluster of --group-replicas, each of N's data
                    group replicas moves first to the member holding
                    the fewest among those not in the group.
  move-replica      (a cluster of --group-replicas) move data group G's
                    replica from member N to member M: M opens an empty
                    replica, joins the group as a learner, catches up
                    and is promoted, then N leaves the group (it deletes
                    its replica when it next starts)
  rebalance         (a cluster of --group-replicas) move replicas, one
                    at a time, from the members holding the most to
                    those holding the fewest until no member holds two
                    more than another; prints each move. The leaderships
                    then spread on their own.
  init-certs        write the files of peer TLS into DIR: a CA for the
                    group (ca.pem, and ca-key.pem, which only this
                    command needs: keep it off the members), a
                    certificate and key per member (member-N.pem,
                    member-N-key.pem) and an operator's client
                    certificate for these commands (operator.pem,
                    operator-key.pem). Files already there are kept:
                    run it again with more --node-ids to issue a new
                    member's certificate from the same CA.

Flags:
  --peer HOST:PORT     the peer address of any member
  --cluster-id ID      the group's cluster id
  --peer-token TOKEN   the group's peer token, when it runs with one
                       (prefer env MQGATE_PEER_TOKEN: flags show in the
                       process list)
  --peer-tls-cert FILE, --peer-tls-key FILE, --peer-tls-ca FILE
                       when the members run with peer TLS: a PEM
                       certificate and key signed by the group's peer CA
                       (a member's will do; client authentication is
                       enough), and the CA bundle the members'
                       certificates are checked against; all three or
                       none (env MQGATE_PEER_TLS_CERT, MQGATE_PEER_TLS_KEY,
                       MQGATE_PEER_TLS_CA)
  --to N               (transfer-leader) the member to hand the leadership to
  --group G            (status, transfer-leader) the data group of a cluster
                       of several (--data-groups); default 0, the first;
                       (move-replica) the data group whose replica moves
  --from N, --to M     (move-replica) the members the replica moves from
                       and to
  --node-id N          (add-node, remove-node) the member to add or remove
  --node-peer HOST:PORT
                       (add-node) the new member's peer address, as the
                       others dial it
  --replaces M         (add-node) the member the new one takes the place
                       of (a cluster of --group-replicas)
  --node-ids LIST      (init-certs) the members to issue certificates for,
                       comma-separated (default 1,2,3)
  --valid DURATION     (init-certs) how long the member and operator
                       certificates are valid (default 17520h, two
                       years; the CA is valid for ten)
  --json               (status) print JSON
  --timeout DURATION   give up after this long (default 10s; add-node,
                       move-replica and remove-node 10m, rebalance 30m)

Exit status: 0 done, 1 failed, 2 usage.
`

// clusterCommand is a parsed `mqgate cluster ...` command line.
type clusterCommand struct {
	sub       string // status, transfer-leader, add-node, remove-node, move-replica, rebalance
	peer      string
	clusterID string
	token     string
	tls       peer.TLSFiles
	to        uint64 // transfer-leader: --to; add-node, remove-node: --node-id
	group     uint64 // status, transfer-leader: --group
	nodePeer  string
	replaces  uint64 // add-node: --replaces
	from      uint64 // move-replica: --from (--to is to)
	json      bool
	timeout   time.Duration
}

func parseClusterArgs(args []string) (clusterCommand, error) {
	var cc clusterCommand
	if len(args) == 0 {
		return cc, usageErr("missing subcommand (status, transfer-leader, add-node, remove-node, move-replica, rebalance or init-certs)")
	}
	cc.sub = args[0]
	fs := newFlagSet("mqgate cluster " + cc.sub)
	fs.StringVar(&cc.peer, "peer", "", "peer address (HOST:PORT) of any member")
	fs.StringVar(&cc.clusterID, "cluster-id", "", "the group's cluster id")
	fs.StringVar(&cc.token, "peer-token", os.Getenv("MQGATE_PEER_TOKEN"), "the group's peer token, when it has one (env MQGATE_PEER_TOKEN)")
	fs.StringVar(&cc.tls.Cert, "peer-tls-cert", os.Getenv("MQGATE_PEER_TLS_CERT"), "peer TLS: PEM certificate signed by the group's peer CA (env MQGATE_PEER_TLS_CERT)")
	fs.StringVar(&cc.tls.Key, "peer-tls-key", os.Getenv("MQGATE_PEER_TLS_KEY"), "peer TLS: PEM private key of --peer-tls-cert (env MQGATE_PEER_TLS_KEY)")
	fs.StringVar(&cc.tls.CA, "peer-tls-ca", os.Getenv("MQGATE_PEER_TLS_CA"), "peer TLS: PEM CA bundle of the group's peer certificates (env MQGATE_PEER_TLS_CA)")
	timeout := 10 * time.Second
	var to string
	toFlag := "to"
	switch cc.sub {
	case "status":
		fs.BoolVar(&cc.json, "json", false, "print JSON")
		fs.Uint64Var(&cc.group, "group", 0, "the data group (a cluster of several)")
	case "transfer-leader":
		fs.StringVar(&to, "to", "", "the member to hand the leadership to")
		fs.Uint64Var(&cc.group, "group", 0, "the data group (a cluster of several)")
	case "add-node":
		toFlag, timeout = "node-id", 10*time.Minute
		fs.StringVar(&to, "node-id", "", "the member to add")
		fs.StringVar(&cc.nodePeer, "node-peer", "", "the new member's peer address (HOST:PORT), as the others dial it")
		fs.Uint64Var(&cc.replaces, "replaces", 0, "the member the new one takes the place of (a cluster of --group-replicas)")
	case "remove-node":
		toFlag, timeout = "node-id", 10*time.Minute
		fs.StringVar(&to, "node-id", "", "the member to remove")
	case "move-replica":
		timeout = 10 * time.Minute
		fs.Uint64Var(&cc.group, "group", 0, "the data group whose replica moves")
		fs.Uint64Var(&cc.from, "from", 0, "the member the replica moves from")
		fs.StringVar(&to, "to", "", "the member the replica moves to")
	case "rebalance":
		timeout = 30 * time.Minute
	case "help", "-h", "--help":
		return cc, flag.ErrHelp
	default:
		return cc, usageErr("unknown subcommand %q (want status, transfer-leader, add-node, remove-node, move-replica, rebalance or init-certs)", cc.sub)
	}
	fs.DurationVar(&cc.timeout, "timeout", timeout, "give up after this long")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return cc, err
	}
	switch {
	case len(pos) > 0:
		return cc, usageErr("cluster %s takes no arguments, got %q", cc.sub, pos)
	case cc.peer == "":
		return cc, usageErr("--peer HOST:PORT is required")
	case cc.clusterID == "":
		return cc, usageErr("--cluster-id is required")
	case cc.timeout <= 0:
		return cc, usageErr("--timeout %v: want a positive duration", cc.timeout)
	case cc.tls != (peer.TLSFiles{}) && (cc.tls.Cert == "" || cc.tls.Key == "" || cc.tls.CA == ""):
		return cc, usageErr("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together (or MQGATE_PEER_TLS_CERT, _KEY and _CA)")
	}
	if cc.sub != "status" && cc.sub != "rebalance" {
		if to == "" {
			return cc, usageErr("--%s N is required", toFlag)
		}
		if cc.to, err = strconv.ParseUint(to, 10, 64); err != nil || cc.to == 0 {
			return cc, usageErr("--%s %q: want a member id above 0", toFlag, to)
		}
	}
	if cc.sub == "move-replica" {
		switch {
		case cc.group == 0:
			return cc, usageErr("--group G is required: a data group above 0 (group 0 is on every member)")
		case cc.from == 0:
			return cc, usageErr("--from N is required: the member the replica moves from")
		case cc.from == cc.to:
			return cc, usageErr("--from and --to name the same member %d", cc.to)
		}
	}
	if cc.sub == "add-node" {
		if cc.nodePeer == "" {
			return cc, usageErr("--node-peer HOST:PORT is required")
		}
		if _, _, err := net.SplitHostPort(cc.nodePeer); err != nil {
			return cc, usageErr("--node-peer %q: %v", cc.nodePeer, err)
		}
		if cc.replaces == cc.to {
			return cc, usageErr("--replaces %d: a member cannot replace itself; the replacement joins under a new --node-id", cc.replaces)
		}
	}
	return cc, nil
}

func clusterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "init-certs" {
		return initCertsCmd(args[1:], stdout, stderr)
	}
	cc, err := parseClusterArgs(args)
	if err != nil {
		return usageExit("cluster", clusterUsage, err, stdout, stderr)
	}
	ctx = peer.WithToken(ctx, cc.token)
	if cc.tls != (peer.TLSFiles{}) {
		t, err := peer.LoadTLS(cc.tls, nil)
		if err != nil {
			fmt.Fprintf(stderr, "mqgate cluster %s: %v\n", cc.sub, err)
			return exitFail
		}
		ctx = peer.WithTLS(ctx, t)
	}
	ctx, cancel := context.WithTimeout(ctx, cc.timeout)
	defer cancel()
	switch cc.sub {
	case "status":
		err = clusterStatus(ctx, cc, stdout)
	case "transfer-leader":
		if err = peer.DialGroupTransfer(ctx, cc.peer, cc.clusterID, cc.group, cc.to); err == nil {
			fmt.Fprintf(stdout, "member %d leads\n", cc.to)
		}
	case "add-node":
		if cc.replaces != 0 {
			if err = peer.DialReplaceMember(ctx, cc.peer, cc.clusterID, cc.replaces, cc.to, cc.nodePeer); err == nil {
				fmt.Fprintf(stdout, "member %d votes in the place of member %d, which was removed\n", cc.to, cc.replaces)
			}
		} else if err = peer.DialAddMember(ctx, cc.peer, cc.clusterID, cc.to, cc.nodePeer); err == nil {
			fmt.Fprintf(stdout, "member %d votes\n", cc.to)
		}
	case "remove-node":
		if err = peer.DialRemoveMember(ctx, cc.peer, cc.clusterID, cc.to); err == nil {
			fmt.Fprintf(stdout, "member %d removed\n", cc.to)
		}
	case "move-replica":
		if err = peer.DialMoveReplica(ctx, cc.peer, cc.clusterID, cc.group, cc.from, cc.to); err == nil {
			fmt.Fprintf(stdout, "data group %d's replica moved from member %d to member %d\n", cc.group, cc.from, cc.to)
		}
	case "rebalance":
		var moves []peer.Move
		moves, err = peer.DialRebalance(ctx, cc.peer, cc.clusterID)
		for _, m := range moves {
			fmt.Fprintf(stdout, "data group %d's replica moved from member %d to member %d\n", m.Group, m.From, m.To)
		}
		if err == nil {
			fmt.Fprintf(stdout, "%d replicas moved: the members' replicas are even\n", len(moves))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqgate cluster %s: %s\n", cc.sub, explainPeerError(err, cc))
		return exitFail
	}
	return exitOK
}

// clusterStatus prints the --peer member's status. Only the leader knows
// the members' log progress: when the member asked does not lead, the
// progress comes from the leader it names (left out if that one does
// not answer).
func clusterStatus(ctx context.Context, cc clusterCommand, w io.Writer) error {
	st, err := peer.DialGroupStatus(ctx, cc.peer, cc.clusterID, cc.group)
	if err != nil {
		return err
	}
	var progressErr error
	if st.Progress == nil && st.Leader != 0 && st.Leader != st.ID {
		if addr := st.Peers[st.Leader]; addr != "" {
			ls, err := peer.DialGroupStatus(ctx, addr, cc.clusterID, cc.group)
			switch {
			case err != nil:
				progressErr = err
			case ls.Leader == ls.ID:
				st.Progress = ls.Progress
			default:
				progressErr = fmt.Errorf("member %d no longer leads", st.Leader)
			}
		}
	}
	if cc.json {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if st.Group != 0 {
		fmt.Fprintf(w, "data group %d\n", st.Group)
	}
	fmt.Fprintf(w, "member %d (%s), term %d\n", st.ID, strings.TrimPrefix(st.State, "State"), st.Term)
	switch {
	case st.Leader == 0:
		fmt.Fprintln(w, "leader: none known (an election may be under way)")
	default:
		fmt.Fprintf(w, "leader: %d at %s\n", st.Leader, st.Peers[st.Leader])
	}
	fmt.Fprintf(w, "commit %d, applied %d, raft log from %d\n", st.Commit, st.Applied, st.FirstIndex)
	if st.LeadTransferee != 0 {
		fmt.Fprintf(w, "leadership being transferred to %d\n", st.LeadTransferee)
	}
	if progressErr != nil {
		fmt.Fprintf(w, "log progress unknown: the leader did not answer (%v)\n", progressErr)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tPEER\tROLE\tMATCH\tNEXT\tSTATE")
	for _, id := range slices.Sorted(maps.Keys(st.Peers)) {
		role := "follower"
		switch {
		case id == st.Leader:
			role = "leader"
		case slices.Contains(st.Learners, id):
			role = "learner"
		}
		match, next, state := "-", "-", "-"
		if p, ok := st.Progress[id]; ok {
			match, next = strconv.FormatUint(p.Match, 10), strconv.FormatUint(p.Next, 10)
			state = strings.TrimPrefix(p.State, "State")
			if !p.RecentActive && id != st.Leader {
				state += " (inactive)"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", id, st.Peers[id], role, match, next, state)
	}
	return tw.Flush()
}

// explainPeerError turns a failed peer call into one line for the user.
func explainPeerError(err error, cc clusterCommand) string {
	switch status.Code(err) {
	case codes.Unavailable:
		msg := status.Convert(err).Message()
		switch {
		case cc.tls == (peer.TLSFiles{}) && strings.Contains(msg, "server preface"):
			return fmt.Sprintf("the member at %s closed the connection: if the members run with peer TLS, pass --peer-tls-cert, --peer-tls-key and --peer-tls-ca (%v)", cc.peer, err)
		case cc.tls != (peer.TLSFiles{}) && (strings.Contains(msg, "handshake") || strings.Contains(msg, "tls: ")):
			return fmt.Sprintf("the TLS handshake with the member at %s failed: do its peer TLS settings match --peer-tls-cert, --peer-tls-key and --peer-tls-ca? (%v)", cc.peer, err)
		case cc.tls != (peer.TLSFiles{}) && !strings.Contains(msg, "connection refused") && !strings.Contains(msg, "no such host"):
			// TLS 1.3: the member checks the client certificate after
			// the client's side of the handshake is done, and closes
			// the connection when it refuses it.
			return fmt.Sprintf("the member at %s closed the connection after the TLS handshake: it may refuse --peer-tls-cert (is it signed by the members' peer CA, for client authentication?) (%v)", cc.peer, err)
		}
		return fmt.Sprintf("cannot reach a member at %s: is it a member's peer address? (%v)", cc.peer, err)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %s (%v)", cc.timeout, err)
	case codes.Unauthenticated:
		return fmt.Sprintf("the member refused the peer token: give the members' token in MQGATE_PEER_TOKEN (or --peer-token) (%v)", err)
	case codes.PermissionDenied:
		return fmt.Sprintf("the member refused cluster id %q: it belongs to another cluster (%v)", cc.clusterID, err)
	case codes.Unimplemented:
		return fmt.Sprintf("%s does not serve the cluster peer service: is it a member's peer address? (%v)", cc.peer, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s (%v)", cc.timeout, err)
	}
	return err.Error()
}

// initCertsCmd is `mqgate cluster init-certs DIR`: it writes a peer CA
// and a certificate per member (peer.IssueCerts) and says which flags
// take them.
func initCertsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mqgate cluster init-certs")
	ids := fs.String("node-ids", "1,2,3", "the members to issue certificates for, comma-separated")
	valid := fs.Duration("valid", 2*365*24*time.Hour, "how long the member and operator certificates are valid")
	pos, err := parseInterleaved(fs, args)
	if err == nil {
		switch {
		case len(pos) != 1:
			err = usageErr("init-certs takes one directory, got %q", pos)
		case *valid <= 0:
			err = usageErr("--valid %v: want a positive duration", *valid)
		}
	}
	var members []uint64
	if err == nil {
		for _, f := range strings.Split(*ids, ",") {
			id, perr := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if perr != nil || id == 0 {
				err = usageErr("--node-ids %q: want member ids above 0, comma-separated", *ids)
				break
			}
			members = append(members, id)
		}
	}
	if err != nil {
		return usageExit("cluster", clusterUsage, err, stdout, stderr)
	}
	dir := pos[0]
	wrote, err := peer.IssueCerts(dir, members, *valid)
	for _, f := range wrote {
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqgate cluster init-certs: %v\n", err)
		return exitFail
	}
	if len(wrote) == 0 {
		fmt.Fprintf(stdout, "%s already holds every file asked for\n", dir)
	}
	m := peer.CertFiles(dir, members[0])
	op := peer.CertFiles(dir, 0)
	fmt.Fprintf(stdout, "\nMember %d runs with:\n  --peer-tls-cert %s --peer-tls-key %s --peer-tls-ca %s\n", members[0], m.Cert, m.Key, m.CA)
	fmt.Fprintf(stdout, "(each member its own member-N files; copy ca-key.pem to none of them)\n")
	fmt.Fprintf(stdout, "The mqgate cluster commands run with:\n  --peer-tls-cert %s --peer-tls-key %s --peer-tls-ca %s\n", op.Cert, op.Key, op.CA)
	return exitOK
}
