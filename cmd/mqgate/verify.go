package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mqgate/mqgate/gateway/node"
)

const verifyUsage = `Usage: mqgate verify [--data-dir DIR]

Checks the store of a stopped gateway without changing anything: the
format version, every record of the commit log, the checkpoint, the
consume queues and the index. Prints each problem and what
'mqgate repair' would do about it, including what it would drop.
Exit status: 0 no damage (a torn log tail a crash left is reported but
is not damage: the next start cuts it), 1 damage found or the check
failed, 2 usage.

Flags:
  --data-dir DIR   the gateway's data directory (its store is DIR/store),
                   or the store directory itself (default ./data)
`

const repairUsage = `Usage: mqgate repair [--data-dir DIR] [--salvage] [--yes]

Repairs the store of a stopped gateway. Without --yes it only prints what
it would do. Damage in the commit log is cut out by truncating the log
at its first invalid byte: every record before it is kept; the records
after it leave the store, and the cut-off bytes are saved under
DIR/store/repair-saved/. A damaged checkpoint, consume queues or index are
removed and rebuilt from the log. The store is then opened once to
rebuild them.

With --salvage the messages after the damage are kept too: once the log
is cut, the valid records found in the cut-off bytes are appended again,
in their order, with new offsets and their message ids, keys and
properties (the broker's own bookkeeping records are left out), and
committed consumer offsets past the damage are moved so that no consumer
skips one. A salvage a crash interrupted is finished by running it again;
nothing is appended twice. 'mqgate verify' shows what a salvage would
bring back.

Flags:
  --data-dir DIR   the gateway's data directory (its store is DIR/store),
                   or the store directory itself (default ./data)
  --salvage        append again the valid records after the damage
  --yes            do the repair (without it: print the plan and exit 1
                   if there is damage)
`

func parseStoreFlags(name string, args []string, yes, salvage *bool) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("data-dir", "./data", "")
	if yes != nil {
		fs.BoolVar(yes, "yes", false, "")
	}
	if salvage != nil {
		fs.BoolVar(salvage, "salvage", false, "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return "", usageErr("unexpected argument %q", fs.Arg(0))
	}
	return *dir, nil
}

func verifyCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	dir, err := parseStoreFlags("verify", args, nil, nil)
	if err != nil {
		return usageExit("verify", verifyUsage, err, stdout, stderr)
	}
	r, err := node.VerifyStore(dir)
	if err != nil {
		fmt.Fprintf(stderr, "mqgate verify: %v\n", err)
		return exitFail
	}
	printReport(stdout, r)
	if r.Damaged() {
		salvage := ""
		if r.Salvageable > 0 {
			salvage = " (--salvage to keep the messages after the damage)"
		}
		fmt.Fprintf(stdout, "\nresult: DAMAGED. 'mqgate repair --data-dir %s' prints the plan; add --yes to repair%s.\n", dir, salvage)
		return exitFail
	}
	if len(r.PendingSalvages) > 0 {
		fmt.Fprintf(stdout, "\nresult: no damage, but a salvage did not finish: 'mqgate repair --data-dir %s --salvage --yes' finishes it\n", dir)
		return exitOK
	}
	fmt.Fprintln(stdout, "\nresult: no damage")
	return exitOK
}

func repairCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var yes, salvage bool
	dir, err := parseStoreFlags("repair", args, &yes, &salvage)
	if err != nil {
		return usageExit("repair", repairUsage, err, stdout, stderr)
	}
	flags := ""
	if salvage {
		flags = " --salvage"
	}
	if !yes {
		r, err := node.VerifyStore(dir)
		if err != nil {
			fmt.Fprintf(stderr, "mqgate repair: %v\n", err)
			return exitFail
		}
		printReport(stdout, r)
		if !r.Damaged() && (!salvage || len(r.PendingSalvages) == 0) {
			fmt.Fprintln(stdout, "\nnothing to repair")
			return exitOK
		}
		fmt.Fprintf(stdout, "\nnothing changed: the repair lines above are the plan; run 'mqgate repair --data-dir %s%s --yes' to carry it out\n", dir, flags)
		return exitFail
	}
	repair := node.RepairStore
	if salvage {
		repair = node.SalvageStore
	}
	rep, err := repair(ctx, dir)
	if rep != nil && rep.Found != nil {
		printReport(stdout, rep.Found)
		fmt.Fprintln(stdout)
		for _, a := range rep.Actions {
			fmt.Fprintf(stdout, "done: %s\n", a)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqgate repair: %v\n", err)
		return exitFail
	}
	if len(rep.Actions) == 0 {
		fmt.Fprintln(stdout, "no damage: nothing changed")
	}
	fmt.Fprintf(stdout, "store opens: log positions %d to %d, %d bytes replayed into queues and index\n",
		rep.After.LogMin, rep.End, rep.After.ReplayedBytes)
	return exitOK
}

func printReport(w io.Writer, r *node.StoreReport) {
	format := fmt.Sprintf("format version %d", r.Format)
	if !r.FormatRecorded {
		format += " (not recorded yet: the next start writes FORMAT)"
	}
	fmt.Fprintf(w, "store: %s, %s\n", r.Dir, format)
	if r.Unclean {
		fmt.Fprintln(w, "last run: did not close cleanly (the next start recovers)")
	}
	fmt.Fprintf(w, "commit log: %d segments, log positions %d to %d, %d valid records\n", r.Segments, r.LogMin, r.LogEnd, r.Records)
	if r.ValidEnd < r.LogEnd {
		fmt.Fprintf(w, "valid log ends at %d: %d bytes after it, holding %d valid records\n", r.ValidEnd, r.LogEnd-r.ValidEnd, r.RecordsAfter)
	}
	if r.Salvageable > 0 {
		fmt.Fprintf(w, "salvage: %d of them (originally at log positions %d to %d) can be appended again with 'mqgate repair --salvage'", r.Salvageable, r.SalvageFirst, r.SalvageLast)
		if r.SalvageSkipped > 0 {
			fmt.Fprintf(w, "; %d records of the broker's own bookkeeping would be left out", r.SalvageSkipped)
		}
		fmt.Fprintln(w)
	}
	if r.Checkpoint {
		fmt.Fprintf(w, "checkpoint: log fsynced to %d, dispatched to %d; %d consume-queue entries checked\n",
			r.CheckpointFlushed, r.CheckpointDispatch, r.QueueEntries)
	} else {
		fmt.Fprintln(w, "checkpoint: none usable (the next start validates the whole log and rebuilds queues and index)")
	}
	if len(r.Problems) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, p := range r.Problems {
		kind := "DAMAGE"
		if !p.Damage {
			kind = "note"
		}
		where := p.File
		if p.Pos >= 0 {
			where += fmt.Sprintf(" at log position %d", p.Pos)
		}
		fmt.Fprintf(w, "%s %s: %s: %s\n", kind, p.Part, where, p.What)
		if p.Repair != "" {
			fmt.Fprintf(w, "  repair: %s\n", p.Repair)
		}
	}
}
