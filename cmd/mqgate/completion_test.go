package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `mqgate help CMD` is `mqgate CMD -h`; an unknown command is refused.
func TestHelpCommandIsCommandDashH(t *testing.T) {
	for _, c := range commands() {
		if c == "help" || c == "version" {
			continue
		}
		var h1, e1, h2, e2 bytes.Buffer
		code1 := run(context.Background(), []string{"help", c}, &h1, &e1)
		code2 := run(context.Background(), []string{c, "-h"}, &h2, &e2)
		if code1 != code2 || h1.String() != h2.String() || e1.String() != e2.String() || h1.Len()+e1.Len() == 0 {
			t.Errorf("help %s: exit %d, %d bytes; %s -h: exit %d, %d bytes", c, code1, h1.Len()+e1.Len(), c, code2, h2.Len()+e2.Len())
		}
		if strings.Contains(h1.String(), "mqgate — a RocketMQ 5 compatible messaging gateway") {
			t.Errorf("help %s printed the global usage", c)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help", "nosuch"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "nosuch"`) {
		t.Fatalf("help nosuch: exit %d, stderr %q", code, errb.String())
	}
}

// The completions offer every command, every server setting and the
// subcommands and flags each command's help lists.
func TestCompletionSpecsFollowTheCommands(t *testing.T) {
	specs := map[string]cmdSpec{}
	for _, s := range completionSpecs() {
		specs[s.name] = s
	}
	for _, c := range commands() {
		if _, ok := specs[c]; !ok {
			t.Errorf("no completion for command %s", c)
		}
	}
	for _, s := range settings {
		if !slices.Contains(specs["serve"].flags, "--"+s.name) {
			t.Errorf("serve completion lacks --%s", s.name)
		}
	}
	for cmd, want := range map[string][]string{
		"topic":   {"create", "list", "describe", "delete", "lite", "--type", "--queues", "--lite-ttl", "--server"},
		"group":   {"reset-offset", "dead-letters", "redrive", "--to-time", "--fifo"},
		"cluster": {"status", "add-node", "remove-node", "transfer-leader", "init-certs", "--peer-tls-key", "--node-peer"},
		"bench":   {"produce", "consume", "e2e", "http", "remoting", "--ack-batch", "--rounds"},
		"receive": {"--no-ack", "--follow", "--sql"},
		"message": {"show", "--topic"},
	} {
		got := append(append([]string(nil), specs[cmd].subs...), specs[cmd].flags...)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s completion lacks %s (has %v)", cmd, w, got)
			}
		}
	}
	if slices.Contains(specs["topic"].flags, "--auth-file") {
		t.Errorf("topic completion offers --auth-file, a flag its help only names in prose")
	}
}

// The bash script, loaded into a real bash, completes as a user types.
func TestBashCompletionInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	var script bytes.Buffer
	if code := run(context.Background(), []string{"completion", "bash"}, &script, &script); code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, script.String())
	}
	file := filepath.Join(t.TempDir(), "mqgate.bash")
	if err := os.WriteFile(file, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"mqgate", "to"}, []string{"topic"}},
		{[]string{"mqgate", "c"}, []string{"cluster", "completion"}},
		{[]string{"mqgate", "topic", "cr"}, []string{"create"}},
		{[]string{"mqgate", "group", "re"}, []string{"redrive", "reset-offset"}},
		{[]string{"mqgate", "serve", "--data"}, []string{"--data-dir", "--data-groups"}},
		{[]string{"mqgate", "serve", "--peer-tls"}, []string{"--peer-tls-ca", "--peer-tls-cert", "--peer-tls-key"}},
		{[]string{"mqgate", "cluster", "add-node", "--node-p"}, []string{"--node-peer"}},
		{[]string{"mqgate", "help", "gr"}, []string{"group"}},
		{[]string{"mqgate", "completion", "f"}, []string{"fish"}},
	} {
		words := make([]string, len(c.words))
		for i, w := range c.words {
			words[i] = "'" + w + "'"
		}
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c",
			`source "$1" && COMP_WORDS=(`+strings.Join(words, " ")+`) && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && _mqgate && printf '%s\n' "${COMPREPLY[@]}"`,
			"bash", file)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.words, err, out)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s<TAB>: %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}

// The zsh and fish scripts parse in their shells, where installed.
func TestZshAndFishCompletionParse(t *testing.T) {
	for _, sh := range []struct{ shell, check string }{{"zsh", "-n"}, {"fish", "--no-execute"}} {
		var script bytes.Buffer
		if code := run(context.Background(), []string{"completion", sh.shell}, &script, &script); code != 0 || !strings.Contains(script.String(), "mqgate") {
			t.Fatalf("completion %s: exit %d: %s", sh.shell, code, script.String())
		}
		path, err := exec.LookPath(sh.shell)
		if err != nil {
			t.Logf("%s is not installed: its script is not parsed", sh.shell)
			continue
		}
		file := filepath.Join(t.TempDir(), "mqgate."+sh.shell)
		if err := os.WriteFile(file, script.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, sh.check, file).CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", sh.shell, sh.check, err, out)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"completion", "tcsh"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"tcsh"`) {
		t.Fatalf("completion tcsh: exit %d, %q", code, errb.String())
	}
}
