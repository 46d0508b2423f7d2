package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/core"
	"github.com/shoaldb/shoal/bench/scenario"
)

var scenarioFlags struct {
	out      string
	dir      string
	duration time.Duration
	records  int
	threads  int
	splits   int
	// surgeThreads overrides a surge scenario's added client threads.
	surgeThreads int
	list         bool
	// noEmulatedDisk runs the nodes on the shared disk and page cache instead of per-node devices.
	noEmulatedDisk bool
	// variants restricts a scenario with variants to these.
	variants []string
	// randomValues writes incompressible values.
	randomValues bool
	// fastLoad loads with the emulated disks' budgets lifted.
	fastLoad bool
	// pageCacheMiB is every emulated disk's modeled page cache (0: the scenario's, none).
	pageCacheMiB int64
	// lbaseKiB and targetFileKiB shape the engines' LSM (0: Pebble's).
	lbaseKiB, targetFileKiB int64
	// repeat runs the whole scenario this many times and reports each figure's spread.
	repeat int
}

var benchScenarioCmd = &cobra.Command{
	Use:   "scenario NAME --out DIR",
	Short: "Run a scripted experiment twice (its policy on, then off) and write report.json and PNG timelines",
	Long: `Start a local cluster of in-process nodes, load data, run a closed-loop workload and fire the
scenario's scheduled events (leadership transfers, node kills and restarts, policy switches), twice:
once with the scenario's autopilot policy on and once with it off, each on a fresh cluster. Writes
DIR/report.json (settings, both runs' summaries, per-second series and events) and PNG timelines
(throughput.png, latency.png, hit_ratio.png) with the two runs side by side and events marked.
--duration rescales the scenario's event offsets with it. --list prints the scenarios.

--repeat N runs the whole scenario N times (DIR/rep-1 ... DIR/rep-N, the order of the runs reversed in
every other repetition so that a drift of the machine favours neither) and writes DIR/repeat.json:
per run, each figure's mean, standard deviation, minimum and maximum over the repetitions (the
throughput and p99 of every run; a join's time, first range served, full leader share, worst dip,
noise floor and SLO scores, the latter also against one threshold for every run: *_common). One run
is one sample of a noisy machine: compare means with their spreads.`,
	Example: "  shoal bench scenario node-kill --out /tmp/node-kill\n  shoal bench scenario join --variants incremental,parallel --repeat 5 --out /tmp/join5\n  shoal bench scenario leader-transfer --out /tmp/lt --duration 6s --records 1000\n  shoal bench scenario --list",
	Args: func(cmd *cobra.Command, args []string) error {
		if scenarioFlags.list {
			return cobra.NoArgs(cmd, args)
		}
		return cobra.ExactArgs(1)(cmd, args)
	},
	RunE: func(cmd *cobra.Command, args []string) error {
		if scenarioFlags.list {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tPOLICY\tDURATION\tDESCRIPTION")
			for _, s := range scenario.List() {
				fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", s.Name, s.Policy, s.Duration, s.Description)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nVariants (run by default; [optional]: only when --variants names them):")
			for _, s := range scenario.List() {
				if names := variantNames(s.Variants); names != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "  %s: %s\n", s.Name, names)
				}
			}
			return nil
		}
		sc, ok := scenario.Lookup(args[0])
		if !ok {
			return fmt.Errorf("unknown scenario %q (see --list)", args[0])
		}
		if scenarioFlags.out == "" {
			return fmt.Errorf("--out is required")
		}
		dir := scenarioFlags.dir
		if dir == "" {
			d, err := core.TempDir()
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		fmt.Fprintf(os.Stderr, "scenario %s: %s; data in %s\n", sc.Name, sc.Description, dir)
		opts := scenario.Options{
			Dir: dir, Out: scenarioFlags.out, Duration: scenarioFlags.duration,
			Records: scenarioFlags.records, Threads: scenarioFlags.threads, Splits: scenarioFlags.splits,
			SurgeThreads: scenarioFlags.surgeThreads, Progress: os.Stderr,
			NoEmulatedDisk: scenarioFlags.noEmulatedDisk, Variants: scenarioFlags.variants,
			RandomValues: scenarioFlags.randomValues, FastLoad: scenarioFlags.fastLoad,
			PageCacheBytes: scenarioFlags.pageCacheMiB << 20,
			LBaseMaxBytes:  scenarioFlags.lbaseKiB << 10, TargetFileBytes: scenarioFlags.targetFileKiB << 10,
		}
		if scenarioFlags.repeat != 1 {
			rr, err := scenario.RunRepeated(cmd.Context(), sc, opts, scenarioFlags.repeat)
			if err != nil {
				return err
			}
			if err := rr.Print(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %d reports under %s/rep-*\n", filepath.Join(scenarioFlags.out, "repeat.json"), rr.Repetitions, scenarioFlags.out)
			return nil
		}
		rep, err := scenario.Run(cmd.Context(), sc, opts)
		if err != nil {
			return err
		}
		for _, r := range rep.Runs {
			fmt.Fprintf(cmd.OutOrStdout(), "%s=%v: %d ops, %.0f ops/s, p50 %.2f ms, p99 %.2f ms, %d errors\n", rep.Policy, r.PolicyOn,
				r.Summary.Ops, r.Summary.Throughput, r.Summary.P50Ms, r.Summary.P99Ms, r.Summary.Errors)
		}
		// The read-hints scenarios' figures (time back to 95 %, hit ratios per node); nothing for others.
		if _, err := scenario.ReadHintsAnalysis(rep, scenarioFlags.out, cmd.OutOrStdout()); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s", filepath.Join(scenarioFlags.out, "report.json"))
		for _, p := range rep.Plots {
			fmt.Fprintf(cmd.OutOrStdout(), ", %s", p)
		}
		fmt.Fprintln(cmd.OutOrStdout())
		return nil
	},
}

func init() {
	f := benchScenarioCmd.Flags()
	f.StringVar(&scenarioFlags.out, "out", "", "directory for report.json and the PNG timelines")
	f.StringVar(&scenarioFlags.dir, "data-dir", "", "directory for the nodes' data (default: a fresh directory under $TMPDIR, removed afterwards)")
	f.DurationVar(&scenarioFlags.duration, "duration", 0, "measured workload per run (default: the scenario's; event offsets scale with it)")
	f.IntVar(&scenarioFlags.records, "records", 0, "records loaded before the workload (default: the scenario's)")
	f.IntVar(&scenarioFlags.threads, "threads", 0, "workload threads (default: the scenario's)")
	f.IntVar(&scenarioFlags.surgeThreads, "surge-threads", 0, "client threads the load surge adds (join-surge scenarios only; default: the scenario's, 8: 16 -> 24)")
	f.IntVar(&scenarioFlags.splits, "splits", 0, "pre-split the key space into this many equal ranges after loading (default: the scenario's; in the join scenarios a range is the unit of a move)")
	f.BoolVar(&scenarioFlags.randomValues, "random-values", false, "write random (incompressible) values instead of one fixed pattern of letters, which compresses ~7x: the stores then hold what was written, over several levels (docs/bench-join.md, session 23)")
	f.BoolVar(&scenarioFlags.fastLoad, "fast-load", false, "load the data and let the engines compact it with the emulated disks' budgets lifted, restoring them before the workload (set-up only: a 250-IOPS disk takes most of a run to load incompressible data)")
	f.Int64Var(&scenarioFlags.pageCacheMiB, "page-cache-mib", 0, "give every node's emulated disk a page cache of this many MiB (least recently used pages evicted; what it holds is read for free) instead of none (docs/design/emudisk.md; 0: none, the scenarios' default)")
	f.Int64Var(&scenarioFlags.lbaseKiB, "lbase-kib", 0, "every engine's base-level target size in KiB (0: Pebble's 64 MiB, which keeps a store smaller than it all in the bottom level; a variant's own base level wins)")
	f.Int64Var(&scenarioFlags.targetFileKiB, "target-file-kib", 0, "every engine's L0 table target size in KiB, doubling per level below the base (0: Pebble's 2 MiB); with --lbase-kib it scales the LSM to a small store, so a compaction below the base level rewrites a slice of the key space, not all of it (docs/bench-join.md, session 27)")
	f.BoolVar(&scenarioFlags.list, "list", false, "list the scenarios")
	f.BoolVar(&scenarioFlags.noEmulatedDisk, "no-emulated-disk", false, "run the nodes on the shared disk and OS page cache instead of per-node emulated devices (page-cache bypass and a disk budget per node; see docs/design/emudisk.md)")
	f.StringSliceVar(&scenarioFlags.variants, "variants", nil, "run only these variants of a scenario that has variants (e.g. join: incremental,parallel); optional variants run only when named here (--list shows every scenario's variants)")
	f.IntVar(&scenarioFlags.repeat, "repeat", 1, "run the whole scenario this many times (at least 2 when set) and write DIR/repeat.json with each figure's mean, sd, min and max")
	benchCmd.AddCommand(benchScenarioCmd)
	pf := benchPoolCmd.Flags()
	pf.StringVar(&poolFlags.out, "out", "", "also write the statistics (or, with --compare, the comparison) to this JSON file")
	pf.StringVar(&poolFlags.compare, "compare", "", "A,B: pair the runs of variants A and B as they ran side by side in each report and print B / A of their SLO scores with 95 % bootstrap intervals over the pairs (e.g. incremental,parallel)")
	pf.StringVar(&poolFlags.control, "control", "", "with --compare: a variant without the mechanism (e.g. no-join) whose SLO score over A's join length is the floor; adds A / floor and B / floor")
	pf.Float64Var(&poolFlags.thresholdMs, "threshold", 0, "with --compare: one SLO threshold in ms for every run instead of each run's own (1.5 x its steady p99)")
	benchCmd.AddCommand(benchPoolCmd)
}

var poolFlags struct {
	out         string
	compare     string
	control     string
	thresholdMs float64
}

var benchPoolCmd = &cobra.Command{
	Use:   "pool REPORT.json...",
	Short: "Pool finished runs of one scenario: each figure's mean, sd, min and max; or (--compare) two variants' paired SLO ratios with intervals",
	Long: `Read the report.json of finished scenario runs and print what --repeat prints for its own
repetitions: per run label (variant, or policy=on/off), each figure's mean, standard deviation,
minimum and maximum, and the SLO windows recounted against one threshold for all of them
(*_common). Use it to add repetitions to an earlier invocation, to compare runs of several
invocations against one threshold, or to aggregate the repetitions an interrupted --repeat
finished. All reports must be of one scenario.

With --compare A,B it pairs instead: the k-th run of A and the k-th run of B in each report (they
ran side by side, one after the other) make a pair, and it prints every run's SLO score (the
1-s p99 windows over the threshold from the join's start to its end, their summed excess, and the
chapter's 2-s mean score) and, over all pairs, B / A of each score's mean with a 95 % bootstrap
interval (pairs resampled, seed fixed). With --control C (a variant without the mechanism, such as
the join scenarios' no-join) each pair also takes the k-th run of C and scores it over A's join
length from its own node start: the floor, what the old nodes break without any join. A / floor
near 1 says A costs nothing above it; B / floor bounds what B / A could be for any A (not in a
surge scenario, whose control keeps the surge's load on three nodes: there the floor includes the
overload a join relieves).
One report is enough for --compare when it holds several pairs (--repeat writes one per
repetition, so pass them all).`,
	Example: "  shoal bench pool /tmp/jl/rep-1/report.json /tmp/jl/rep-2/report.json /tmp/jl-more/rep-*/report.json\n" +
		"  shoal bench pool --out /tmp/pooled.json /tmp/a/report.json /tmp/b/report.json\n" +
		"  shoal bench pool --compare incremental,parallel --control no-join /tmp/js/rep-*/report.json",
	Args: cobra.MinimumNArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		type printWriter interface {
			Print(io.Writer) error
			Write(string) error
		}
		var out printWriter
		switch {
		case poolFlags.compare != "":
			ab := strings.Split(poolFlags.compare, ",")
			if len(ab) != 2 {
				return fmt.Errorf("--compare takes two variants, A,B; got %q", poolFlags.compare)
			}
			c, err := scenario.Compare(args, scenario.CompareOptions{A: strings.TrimSpace(ab[0]), B: strings.TrimSpace(ab[1]),
				Control: poolFlags.control, ThresholdMs: poolFlags.thresholdMs})
			if err != nil {
				return err
			}
			out = c
		case poolFlags.control != "" || poolFlags.thresholdMs != 0:
			return fmt.Errorf("--control and --threshold go with --compare")
		default:
			rr, err := scenario.Pool(args)
			if err != nil {
				return err
			}
			out = rr
		}
		if err := out.Print(cmd.OutOrStdout()); err != nil {
			return err
		}
		if poolFlags.out != "" {
			if err := out.Write(poolFlags.out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", poolFlags.out)
		}
		return nil
	},
}

// variantNames lists a scenario's variants, the optional ones in brackets.
func variantNames(vs []scenario.Variant) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
		if v.Optional {
			names[i] = "[" + v.Name + "]"
		}
	}
	return strings.Join(names, ", ")
}
