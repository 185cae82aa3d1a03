package capacity

import (
	"fmt"
	"strconv"
	"strings"
)

// Target is one configuration the bench measures: a single mqgate, or a
// cluster of Members members, each started with Args besides the
// listener, data and cluster flags the bench gives.
type Target struct {
	// Spec is the configuration as written (its name in the report).
	Spec    string
	Cluster bool
	Members int
	Args    []string
	// Binary is the mqgate binary its members run (empty: the one built
	// from this repository).
	Binary string
	// Env is KEY=VALUE pairs added to the members' environment.
	Env []string
	// Producers, when above 0, is the number of producers sending to it
	// instead of the bench's.
	Producers int
}

// ParseTargets reads a list of configurations separated by ';'. Each is
// "single" or "cluster" (or "clusterN": N members, default members),
// optionally followed by "*P" (P producers send to it instead of the
// bench's number), then by "@" and the path of another mqgate binary to
// run (to compare builds), then the flags its members are started with,
// split at spaces; words of the form NAME=VALUE (NAME in capitals, digits
// and '_') before the flags are set in the members' environment instead:
//
//	single --flush sync; cluster; cluster --data-groups 3; cluster@/tmp/mqgate-before GOGC=200; cluster5*80 --data-groups 6
func ParseTargets(s string, members int) ([]Target, error) {
	var out []Target
	for part := range strings.SplitSeq(s, ";") {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		t := Target{Spec: strings.Join(f, " "), Args: f[1:]}
		for len(t.Args) > 0 && isEnv(t.Args[0]) {
			t.Env, t.Args = append(t.Env, t.Args[0]), t.Args[1:]
		}
		kind, bin, hasBin := strings.Cut(f[0], "@")
		if hasBin && bin == "" {
			return nil, fmt.Errorf("configuration %q: no binary after @", t.Spec)
		}
		t.Binary = bin
		if k, p, ok := strings.Cut(kind, "*"); ok {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("configuration %q: %q after * is not a number of producers", t.Spec, p)
			}
			kind, t.Producers = k, n
		}
		switch {
		case kind == "single":
			t.Members = 1
		case kind == "cluster":
			t.Cluster, t.Members = true, members
		case strings.HasPrefix(kind, "cluster"):
			n, err := strconv.Atoi(strings.TrimPrefix(kind, "cluster"))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("configuration %q: %q is not single, cluster or clusterN", t.Spec, kind)
			}
			t.Cluster, t.Members = true, n
		default:
			return nil, fmt.Errorf("configuration %q: %q is not single, cluster or clusterN", t.Spec, kind)
		}
		for _, a := range t.Args {
			for _, owned := range ownedFlags {
				if a == owned || strings.HasPrefix(a, owned+"=") {
					return nil, fmt.Errorf("configuration %q: %s is set by the bench", t.Spec, owned)
				}
			}
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no configuration in %q", s)
	}
	return out, nil
}

// ownedFlags are the member flags the bench sets itself.
var ownedFlags = []string{"--data-dir", "--grpc-addr", "--http-addr", "--remoting-addr", "--cluster-id", "--node-id", "--peers", "--peer-token"}

// isEnv reports whether w is NAME=VALUE with NAME of capitals, digits
// and '_', not starting with a digit.
func isEnv(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}
