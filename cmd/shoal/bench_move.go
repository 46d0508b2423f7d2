package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/move"
)

var moveFlags struct {
	out         string
	dir         string
	size        string
	rate        string
	valueSize   int
	threads     int
	warmup      time.Duration
	before      time.Duration
	after       time.Duration
	moveTimeout time.Duration
}

var benchMoveCmd = &cobra.Command{
	Use:   "move --out DIR",
	Short: "Move a replica of a large range while a YCSB-B-like workload runs; report move time and foreground p99",
	Long: `Start 4 in-process nodes on loopback (replication factor 3), load --size bytes (keys plus
incompressible values) into one range, wait until every replica applied it, then run a closed-loop
workload (95% reads, 5% updates, scrambled zipfian keys as YCSB B) on --threads workers: --warmup
unmeasured, --before as the baseline, then move one non-leader replica of the range to the fourth
node with RelocateReplica (a learner caught up by a snapshot streamed at --rate, then promoted and the
old replica removed in one joint change) while the workload continues, and --after more once the move
is done. The autopilot's policies are off while it runs, so only the benchmark changes the range.

Reports the snapshot bytes moved, the move time against the time the configured rate allows, the
effective rate (over the whole move and over the snapshot stream) as a ratio to --rate, the
foreground p50/p99 during the move as a ratio to before it, the errors (there should be none) and a
per-second series; then verifies the new replica: every voter's copy checksummed once all applied
the same index, leadership moved to the new node and a sample of keys read through it. Writes
DIR/report.json, DIR/timeline.png and DIR/nodes.log (the nodes' logs) and prints a summary.

The receiver of a snapshot refuses more than 1 GiB of keys plus values, so --size above 1GiB cannot
move. A 1 GiB run loads for about a minute and needs 5-10 GiB of disk under --data-dir (or $TMPDIR)
and, while the new node holds a whole snapshot in memory, up to 15 GiB of memory; a move that does
not finish gives up after --move-timeout.`,
	Example: `  shoal bench move --out /tmp/move
  shoal bench move --size 64MiB --rate 8MiB/s --before 10s --out /tmp/move-small`,
	Args: args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		fl := moveFlags
		if fl.out == "" {
			return usageError{fmt.Errorf("--out is required")}
		}
		size, err := parseSize(fl.size)
		if err != nil {
			return usageError{fmt.Errorf("--size: %w", err)}
		}
		rate, err := parseSize(strings.TrimSuffix(strings.TrimSpace(fl.rate), "/s"))
		if err != nil {
			return usageError{fmt.Errorf("--rate: %w", err)}
		}
		if size <= 0 || rate <= 0 || fl.valueSize <= 0 || fl.threads <= 0 {
			return usageError{fmt.Errorf("--size, --rate, --value-size and --threads must be positive")}
		}
		if fl.warmup < 0 || fl.before <= 0 || fl.after < 0 || fl.moveTimeout <= 0 {
			return usageError{fmt.Errorf("--before and --move-timeout must be positive, --warmup and --after not negative")}
		}
		dir := fl.dir
		if dir == "" {
			d, err := benchutil.TempDir()
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		warmup, after := fl.warmup, fl.after
		if warmup == 0 {
			warmup = -1 // none (zero would mean move's default)
		}
		if after == 0 {
			after = -1
		}
		rep, err := move.Run(cmd.Context(), move.Options{
			Dir: dir, Out: fl.out, SizeBytes: size, ValueBytes: fl.valueSize, RateBytesPerSec: rate, Threads: fl.threads,
			Warmup: warmup, Before: fl.before, After: after, MoveTimeout: fl.moveTimeout, Progress: os.Stderr,
		})
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if jsonOutput() {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			move.WriteSummary(out, rep)
			fmt.Fprintf(out, "wrote %s", filepath.Join(fl.out, "report.json"))
			for _, p := range rep.Plots {
				fmt.Fprintf(out, ", %s", filepath.Join(fl.out, p))
			}
			fmt.Fprintln(out)
		}
		switch {
		case !rep.Move.Done:
			return fmt.Errorf("the move failed: %s", rep.Move.Error)
		case rep.Errors > 0:
			return fmt.Errorf("%d foreground operations failed, e.g. %s", rep.Errors, rep.ErrorSample)
		case !rep.Verify.OK:
			return fmt.Errorf("the new replica did not verify (see verify in report.json)")
		}
		return nil
	},
}

func init() {
	f := benchMoveCmd.Flags()
	f.StringVar(&moveFlags.out, "out", "", "directory for report.json, timeline.png and nodes.log")
	f.StringVar(&moveFlags.dir, "data-dir", "", "directory for the nodes' data (default: a fresh directory under $TMPDIR, removed afterwards)")
	f.StringVar(&moveFlags.size, "size", "1GiB", "range size to load and move: keys plus values (e.g. 8MiB, 1GiB)")
	f.StringVar(&moveFlags.rate, "rate", "32MiB/s", "snapshot send rate of every node (kv SnapshotRateBytesPerSec)")
	f.IntVar(&moveFlags.valueSize, "value-size", move.DefaultValueBytes, "bytes of each record's random value")
	f.IntVar(&moveFlags.threads, "threads", move.DefaultThreads, "closed-loop workload workers")
	f.DurationVar(&moveFlags.warmup, "warmup", move.DefaultWarmup, "unmeasured workload before the baseline")
	f.DurationVar(&moveFlags.before, "before", move.DefaultBefore, "baseline: workload measured before the move starts")
	f.DurationVar(&moveFlags.after, "after", move.DefaultAfter, "workload kept running once the move is done")
	f.DurationVar(&moveFlags.moveTimeout, "move-timeout", move.DefaultMoveTimeout, "give up on the move after this long")
	benchCmd.AddCommand(benchMoveCmd)
}
