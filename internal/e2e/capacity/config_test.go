package capacity

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets(" single --flush sync; cluster ;cluster5 --data-groups 3; cluster@/tmp/old GOGC=200 --flush sync; cluster5*80@/tmp/old --data-groups 6;", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Spec: "single --flush sync", Members: 1, Args: []string{"--flush", "sync"}},
		{Spec: "cluster", Cluster: true, Members: 3, Args: []string{}},
		{Spec: "cluster5 --data-groups 3", Cluster: true, Members: 5, Args: []string{"--data-groups", "3"}},
		{Spec: "cluster@/tmp/old GOGC=200 --flush sync", Cluster: true, Members: 3, Args: []string{"--flush", "sync"}, Binary: "/tmp/old", Env: []string{"GOGC=200"}},
		{Spec: "cluster5*80@/tmp/old --data-groups 6", Cluster: true, Members: 5, Args: []string{"--data-groups", "6"}, Binary: "/tmp/old", Producers: 80},
	}
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Spec != w.Spec || g.Cluster != w.Cluster || g.Members != w.Members || g.Binary != w.Binary || g.Producers != w.Producers ||
			!slices.Equal(g.Args, w.Args) || !slices.Equal(g.Env, w.Env) {
			t.Errorf("target %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestParseTargetsRefuses(t *testing.T) {
	for _, s := range []string{"", " ; ", "mesh", "cluster0", "clusterx", "cluster@", "cluster*", "cluster*0", "single*x", "cluster --peers 1=a", "single --data-dir=/x", "cluster --peer-token t"} {
		if _, err := ParseTargets(s, 3); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	// A word like NAME=VALUE after a flag is the flag's value, not an
	// environment variable.
	got, err := ParseTargets("single --label K=V", 3)
	if err != nil || len(got[0].Env) != 0 || strings.Join(got[0].Args, " ") != "--label K=V" {
		t.Fatalf("%+v, %v", got, err)
	}
}

// A configuration's data groups are read from its flags, in both forms.
func TestDataGroupsFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 1},
		{[]string{"--flush", "sync"}, 1},
		{[]string{"--data-groups", "3"}, 3},
		{[]string{"--flush", "sync", "--data-groups=4"}, 4},
		{[]string{"--data-groups"}, 1},
	} {
		if got := dataGroups(c.args); got != c.want {
			t.Fatalf("%q: %d data groups, want %d", c.args, got, c.want)
		}
	}
}
