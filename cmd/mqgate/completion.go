package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

const completionUsage = `Usage: mqgate completion bash|zsh|fish

Prints a completion script for the shell: commands, their subcommands and
flags. Load it in the current shell, or install it:

  source <(mqgate completion bash)          # bash; or into /etc/bash_completion.d/mqgate
  source <(mqgate completion zsh)           # zsh; or as _mqgate in a directory of $fpath
  mqgate completion fish | source           # fish; or into ~/.config/fish/completions/mqgate.fish
`

func completionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 1 {
			fmt.Fprint(stdout, completionUsage)
			return 0
		}
		fmt.Fprint(stderr, completionUsage)
		return 2
	}
	specs := completionSpecs()
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion(specs))
	case "zsh":
		fmt.Fprint(stdout, zshCompletion(specs))
	case "fish":
		fmt.Fprint(stdout, fishCompletion(specs))
	default:
		fmt.Fprintf(stderr, "mqgate completion: no completion for shell %q\n\n%s", args[0], completionUsage)
		return 2
	}
	return 0
}

// cmdSpec is what completion offers after a command: its subcommands and
// flags (of all its subcommands).
type cmdSpec struct {
	name  string
	subs  []string
	flags []string
}

var (
	// subLine finds a command's subcommands in its usage: "mqgate topic
	// create NAME ...", "mqgate bench produce|consume|...".
	subLine = regexp.MustCompile(`mqgate ([a-z]+) ([a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)*)(?:\s|$)`)
	// flagName is a flag in a usage text: --topic, or -batch as the flag
	// package lists them.
	flagName = regexp.MustCompile(`(?:^|[\s\[,|(])--?([a-z][a-z0-9-]*[a-z0-9])\b`)
	// gap ends the flag column of a flag table's line.
	gap = regexp.MustCompile(`\S {2,}`)
)

// declaredFlags returns the flags text lists: on its synopsis lines
// ("mqgate topic create NAME [--type T]") and in the flag column of its
// flag tables (lines that start with a flag: "  --topic T   topic to
// send to", "  --peer-tls-cert FILE, --peer-tls-key FILE", "  -batch
// int"). Flags only named in prose are not offered.
func declaredFlags(cmd, text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.Contains(l, "mqgate "+cmd):
		case l != t && (strings.HasPrefix(t, "-") || strings.HasPrefix(t, "[-")):
			if loc := gap.FindStringIndex(t); loc != nil {
				t = t[:loc[0]+1]
			}
			l = t
		default:
			continue
		}
		for _, m := range flagName.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// completionSpecs reads every command's help (and each subcommand's) for
// its subcommands and flags, so completion follows the commands as they
// are.
func completionSpecs() []cmdSpec {
	help := func(args ...string) string {
		var b bytes.Buffer
		run(context.Background(), append(args, "-h"), &b, &b)
		return b.String()
	}
	var specs []cmdSpec
	for _, c := range commands() {
		spec := cmdSpec{name: c}
		switch c {
		case "help":
			spec.subs = slices.DeleteFunc(commands(), func(s string) bool { return s == "help" })
			specs = append(specs, spec)
			continue
		case "completion":
			spec.subs = []string{"bash", "zsh", "fish"}
			specs = append(specs, spec)
			continue
		case "version":
			specs = append(specs, spec)
			continue
		}
		text := help(c)
		subs := map[string]bool{}
		for _, m := range subLine.FindAllStringSubmatch(text, -1) {
			if m[1] != c {
				continue
			}
			for _, s := range strings.Split(m[2], "|") {
				subs[s] = true
			}
		}
		flags := map[string]bool{}
		addFlags := func(text string) {
			for _, f := range declaredFlags(c, text) {
				flags[f] = true
			}
		}
		addFlags(text)
		for s := range subs {
			spec.subs = append(spec.subs, s)
			addFlags(help(c, s))
		}
		delete(flags, "h")
		for f := range flags {
			spec.flags = append(spec.flags, "--"+f)
		}
		sort.Strings(spec.subs)
		sort.Strings(spec.flags)
		specs = append(specs, spec)
	}
	return specs
}

func bashCompletion(specs []cmdSpec) string {
	var b strings.Builder
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	b.WriteString("# bash completion for mqgate (mqgate completion bash)\n")
	b.WriteString("_mqgate() {\n")
	b.WriteString("  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[1]}\" subs=\"\" flags=\"\"\n")
	fmt.Fprintf(&b, "  if [[ $COMP_CWORD -eq 1 ]]; then\n    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n", strings.Join(names, " "))
	b.WriteString("  case \"$cmd\" in\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "    %s) subs=%q; flags=%q ;;\n", s.name, strings.Join(s.subs, " "), strings.Join(s.flags, " "))
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [[ \"$cur\" == -* ]]; then\n    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n")
	b.WriteString("  elif [[ $COMP_CWORD -eq 2 && -n \"$subs\" ]]; then\n    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n")
	b.WriteString("  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n")
	b.WriteString("complete -F _mqgate mqgate\n")
	return b.String()
}

func zshCompletion(specs []cmdSpec) string {
	var b strings.Builder
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	b.WriteString("#compdef mqgate\n# zsh completion for mqgate (mqgate completion zsh)\n")
	b.WriteString("_mqgate() {\n  local -a subs flags\n")
	fmt.Fprintf(&b, "  if (( CURRENT == 2 )); then\n    compadd -- %s\n    return\n  fi\n", strings.Join(names, " "))
	b.WriteString("  case ${words[2]} in\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "    %s) subs=(%s); flags=(%s) ;;\n", s.name, strings.Join(s.subs, " "), strings.Join(s.flags, " "))
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [[ ${words[CURRENT]} == -* ]]; then\n    compadd -- $flags\n")
	b.WriteString("  elif (( CURRENT == 3 && ${#subs} > 0 )); then\n    compadd -- $subs\n  else\n    _files\n  fi\n}\n")
	b.WriteString("if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n  _mqgate \"$@\"\nelse\n  compdef _mqgate mqgate\nfi\n")
	return b.String()
}

func fishCompletion(specs []cmdSpec) string {
	var b strings.Builder
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	b.WriteString("# fish completion for mqgate (mqgate completion fish)\n")
	fmt.Fprintf(&b, "complete -c mqgate -n __fish_use_subcommand -f -a %q\n", strings.Join(names, " "))
	for _, s := range specs {
		if len(s.subs) > 0 {
			fmt.Fprintf(&b, "complete -c mqgate -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -f -a %q\n",
				s.name, strings.Join(s.subs, " "), strings.Join(s.subs, " "))
		}
		for _, f := range s.flags {
			fmt.Fprintf(&b, "complete -c mqgate -n '__fish_seen_subcommand_from %s' -l %s\n", s.name, strings.TrimPrefix(f, "--"))
		}
	}
	return b.String()
}
