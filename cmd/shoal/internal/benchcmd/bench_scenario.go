package benchcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/analysis"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/profiles"
	"github.com/shoaldb/shoal/bench/scenario"
)

var scenarioFlags struct {
	out, dir             string
	duration             time.Duration
	records, threads     int
	rate                 float64
	splits, surgeThreads int
	list, noEmulatedDisk bool
	variants, hosts      []string
	pairs                int
	window, skip         time.Duration
	repeat               int
}

var benchScenarioCmd = &cobra.Command{
	Use:   "scenario NAME --out DIR",
	Short: "Run a scripted experiment (each variant, or its policy on then off) and write report.json and PNG timelines",
	Long: `Start a local cluster of in-process nodes, load data, run a closed-loop workload and fire the
scenario's scheduled events (leadership transfers, node kills and restarts, background tasks, a node
joining, a replica moving, policy switches): once per variant of the scenario, or with its autopilot
policy on and then off, each on a fresh cluster. Writes DIR/report.json (the settings, every run's
summary, per-second series, events and scores) and PNG timelines, the runs overlaid (throughput.png,
latency.png, hit_ratio.png; for the read-hints scenarios node_hit_ratio.png and
new_leader_hit_ratio.png; for move snapshot.png). --duration rescales the scenario's event offsets
with it. "shoal bench scenario list" (or --list) prints the scenarios. node-profiles is MeT's
experiment, shoal bench profiles with the settings of docs/design/profiles.md: DIR/report.json is
its JSON (--records and --threads per tenant apply); with --repeat N, DIR/repeat.json holds each
goal figure's median and range over the N runs, each goal judged on the median.

Every run checks its footing and prints the verdicts: the 1-s throughput before its first event has
a coefficient of variation and a largest periodic component of at most 10 %, the runs' steady
states agree within 10 %, a task event records its window, and a background task at least doubles
its node's disk traffic. A failed check exits non-zero after writing the report: its figures do not
count. The compaction and backup scenarios run each side once per offset of the task (median and
range in report.json's tasks), on stores of random values with Pebble's levels scaled to them.

read-hints-overhead switches read hints in ABBA pairs of windows and scores their cost with a 95 %
confidence interval; --pairs, --window and --skip change its schedule. With --hosts it runs against
a cluster already running (one run, the nodes' settings their own): scripts/readhints-saturated.sh
starts one with a saturated serving node and runs it so.

--repeat N runs the whole scenario N times (DIR/rep-1 ... DIR/rep-N, the order of the runs reversed in
every other repetition so that a drift of the machine favours neither) and writes DIR/repeat.json:
per run, each figure's mean, standard deviation, minimum and maximum over the repetitions. One run
is one sample of a noisy machine: compare means with their spreads.`,
	Example: "  shoal bench scenario list\n  shoal bench scenario node-kill --out /tmp/node-kill\n" +
		"  shoal bench scenario move --records 1035000 --duration 120s --out /tmp/move-1g\n" +
		"  shoal bench scenario join --variants incremental,parallel --repeat 5 --out /tmp/join5\n" +
		"  shoal bench scenario read-hints-overhead --pairs 100 --window 4s --skip 2s --out /tmp/rho",
	Args: func(cmd *cobra.Command, args []string) error {
		if scenarioFlags.list {
			return cobra.NoArgs(cmd, args)
		}
		return cobra.ExactArgs(1)(cmd, args)
	},
	RunE: runBenchScenario,
}

func runBenchScenario(cmd *cobra.Command, args []string) error {
	fl := scenarioFlags
	if fl.list || args[0] == "list" {
		return listScenarios(cmd.OutOrStdout())
	}
	if args[0] == nodeProfilesScenario {
		return runNodeProfilesScenario(cmd)
	}
	sc, ok := scenario.Lookup(args[0])
	if !ok {
		return fmt.Errorf("unknown scenario %q (see shoal bench scenario list)", args[0])
	}
	if fl.out == "" {
		return fmt.Errorf("--out is required")
	}
	dir, cleanup, err := scenarioDataDir(fl.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(os.Stderr, "scenario %s: %s; data in %s\n", sc.Name, sc.Description, dir)
	opts := scenario.Options{
		Dir: dir, Out: fl.out, Duration: fl.duration, Records: fl.records, Threads: fl.threads, Rate: fl.rate, Splits: fl.splits,
		SurgeThreads: fl.surgeThreads, Progress: os.Stderr, NoEmulatedDisk: fl.noEmulatedDisk, Variants: fl.variants,
		TogglePairs: fl.pairs, ToggleWindow: fl.window, ToggleSkip: fl.skip, Hosts: fl.hosts,
	}
	out := cmd.OutOrStdout()
	if fl.repeat != 1 {
		reps, paths, err := scenario.Repeat(cmd.Context(), sc, opts, fl.repeat)
		if err != nil && !errors.Is(err, scenario.ErrInvalid) {
			return err
		}
		rr := analysis.Aggregate(sc.Name, reps, paths)
		if err := rr.Write(filepath.Join(fl.out, "repeat.json")); err != nil {
			return err
		}
		if err := rr.Print(out); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s and %d reports under %s/rep-*\n", filepath.Join(fl.out, "repeat.json"), rr.Repetitions, fl.out)
		return err // a failed validity check: the figures above do not count
	}
	rep, err := scenario.Run(cmd.Context(), sc, opts)
	if err != nil && !errors.Is(err, scenario.ErrInvalid) {
		return err
	}
	for _, r := range rep.Runs {
		name := r.Variant
		if name == "" {
			name = fmt.Sprintf("%s=%v", rep.Policy, r.PolicyOn)
		}
		fmt.Fprintf(out, "%s: %d ops, %.0f ops/s, p50 %.2f ms, p99 %.2f ms, %d errors\n", name,
			r.Summary.Ops, r.Summary.Throughput, r.Summary.P50Ms, r.Summary.P99Ms, r.Summary.Errors)
		if c := r.ReadHints; c != nil && c.Paired != nil {
			fmt.Fprintf(out, "  %s\n", c.Paired)
		}
	}
	fmt.Fprintf(out, "wrote %s, %s\n", filepath.Join(fl.out, "report.json"), strings.Join(rep.Plots, ", "))
	return err // a failed validity check: the figures above do not count
}

// listScenarios prints the scenario table.
func listScenarios(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPOLICY\tDURATION\tSCORE\tEVENTS\tVARIANTS ([optional])")
	for _, s := range scenario.List() {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", s.Name, s.Policy, s.Duration, s.Score, s.Schedule(), s.VariantNames())
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", nodeProfilesScenario, "node_profiles", "~35m", "profiles", "-", "-")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range scenario.List() {
		fmt.Fprintf(w, "%s: %s\n", s.Name, s.Description)
	}
	fmt.Fprintf(w, "%s: %s\n", nodeProfilesScenario, nodeProfilesDescription)
	return nil
}

func init() {
	f := benchScenarioCmd.Flags()
	f.StringVar(&scenarioFlags.out, "out", "", "directory for report.json and the PNG timelines")
	f.StringVar(&scenarioFlags.dir, "data-dir", "", "directory for the nodes' data (default: a fresh directory under $TMPDIR, removed afterwards)")
	f.DurationVar(&scenarioFlags.duration, "duration", 0, "measured workload per run (default: the scenario's; event offsets scale with it)")
	f.IntVar(&scenarioFlags.records, "records", 0, "records loaded before the workload (default: the scenario's)")
	f.IntVar(&scenarioFlags.threads, "threads", 0, "workload threads (default: the scenario's)")
	f.Float64Var(&scenarioFlags.rate, "rate", 0, "after the warm-up, offer this many operations a second across the threads instead of a closed loop "+
		"(default: the scenario's; compaction and backup offer 60 % of the throughput the first run's warm-up reached, compaction-50 45 %)")
	f.IntVar(&scenarioFlags.surgeThreads, "surge-threads", 0, "client threads the load surge adds (join-surge; default 8: 16 -> 24)")
	f.IntVar(&scenarioFlags.splits, "splits", 0, "pre-split the key space into this many equal ranges after loading (default: the scenario's; in the join scenarios a range is the unit of a move)")
	f.BoolVar(&scenarioFlags.list, "list", false, "list the scenarios")
	f.BoolVar(&scenarioFlags.noEmulatedDisk, "no-emulated-disk", false, "run the nodes on the shared disk and OS page cache instead of per-node emulated devices (storage/emudisk)")
	f.StringSliceVar(&scenarioFlags.variants, "variants", nil, "run only these variants (e.g. join: incremental,parallel); optional variants run only when named here")
	f.StringSliceVar(&scenarioFlags.hosts, "hosts", nil, "run against the running cluster at these gRPC addresses instead of in-process nodes (one run)")
	f.IntVar(&scenarioFlags.pairs, "pairs", 0, "read-hints-overhead: ABBA pairs of windows (default: as many as fit)")
	f.DurationVar(&scenarioFlags.window, "window", 0, "read-hints-overhead: length of one window (default 12s); with --pairs it sets the run's duration")
	f.DurationVar(&scenarioFlags.skip, "skip", 0, "read-hints-overhead: start of each window left out after its switch (default 5s: nodes read the switch every 2 s)")
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
	out, compare, control string
	thresholdMs           float64
}

var benchPoolCmd = &cobra.Command{
	Use:   "pool REPORT.json...",
	Short: "Pool finished scenario runs: each figure's mean, sd, min and max, the toggled windows' pairs; or (--compare) two variants' paired ratios",
	Long: `Read the report.json of finished scenario runs and print what --repeat prints for its own
repetitions: per run label (variant, or policy=on/off), each figure's mean, standard deviation,
minimum and maximum, and the SLO windows recounted against one threshold for all of them
(*_common); for read-hints-overhead, the pairs of toggled windows of every run pooled into one cost
with its 95 % confidence interval (all pairs, and those whose windows the host stole little from).
All reports must be of one scenario. Reports of node-profiles give its repeat.json instead: each goal
figure's median and range, each goal judged on the median.

With --compare A,B it pairs instead: the k-th run of A and the k-th run of B in each report (they
ran side by side) make a pair, and it prints every run's SLO score (the 1-s p99 windows over the
threshold during the join, their summed excess, and the chapter's 2-s mean score) and, over all
pairs, B / A of each score's mean with a 95 % bootstrap interval (pairs resampled, seed fixed). With
--control C (a variant without the mechanism, such as the join scenarios' no-join) each pair also
scores the k-th run of C over A's join length from its own node start: the floor, what the old nodes
break without any join. One report is enough for --compare when it holds several pairs.`,
	Example: "  shoal bench pool /tmp/j/rep-1/report.json /tmp/j/rep-2/report.json /tmp/j-more/rep-*/report.json\n" +
		"  shoal bench pool /tmp/rho-a/report.json /tmp/rho-b/report.json\n" +
		"  shoal bench pool --compare incremental,parallel --control no-join /tmp/js/rep-*/report.json",
	Args: cobra.MinimumNArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		var out interface {
			Print(io.Writer) error
			Write(string) error
		}
		switch {
		case poolFlags.compare != "":
			ab := strings.Split(poolFlags.compare, ",")
			if len(ab) != 2 {
				return fmt.Errorf("--compare takes two variants, A,B; got %q", poolFlags.compare)
			}
			c, err := analysis.Compare(args, analysis.CompareOptions{A: strings.TrimSpace(ab[0]), B: strings.TrimSpace(ab[1]),
				Control: poolFlags.control, ThresholdMs: poolFlags.thresholdMs})
			if err != nil {
				return err
			}
			out = c
		case poolFlags.control != "" || poolFlags.thresholdMs != 0:
			return fmt.Errorf("--control and --threshold go with --compare")
		case profilesReports(args):
			reps, err := profiles.LoadReports(args)
			if err != nil {
				return err
			}
			out = profiles.Summarize(reps)
		default:
			rr, err := analysis.Pool(args)
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

// profilesReports reports whether the first of paths is a report of the node-profiles experiment
// (the others must be too: profiles.LoadReports says which is not).
func profilesReports(paths []string) bool {
	b, err := os.ReadFile(paths[0])
	return err == nil && profiles.IsReport(b)
}

// scenarioDataDir is where a scenario's nodes keep their data: dir (kept), or a temporary directory
// that cleanup removes.
func scenarioDataDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := benchutil.TempDir()
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
