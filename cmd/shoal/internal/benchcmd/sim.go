package benchcmd

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/sim"
)

var simFlags struct {
	nodes, ranges int
	duration      time.Duration
	seed          uint64
	workload      string
	out           string
	onlyOn        bool
	cpuProfile    string
}

var simCmd = &cobra.Command{
	Use:   "sim SCENARIO | sim list | sim calibrate",
	Short: "Run a scenario on a simulated cluster with the real autopilot (virtual time)",
	Long: `Simulate a scenario: a discrete-event cluster on a virtual clock runs the real autopilot
(policies, executor, decision log) at any size, in seconds. --nodes, --ranges and --duration
override the scenario's size; the same --seed gives the same decision log, byte for byte.
Writes DIR/report.json (the shape of "shoal bench scenario"'s, plus the simulation's cost) and the
decision log as DIR/decisions.json (policy on) and decisions-off.json (policy off).
"shoal sim list" names the scenarios.`,
	Example: "  shoal sim join --out /tmp/sim-join\n  shoal sim scale --nodes 1000 --ranges 100000 --duration 1h --seed 1 --out /tmp/sim-scale",
	Args:    cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		if args[0] == "list" {
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tPOLICY\tEVENTS\tDESCRIPTION")
			for _, s := range sim.List() {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, s.Policy, s.Schedule(), s.Description)
			}
			return w.Flush()
		}
		sc, ok := sim.Lookup(args[0])
		if !ok {
			return cli.Usage(fmt.Errorf("unknown scenario %q (shoal sim list names them)", args[0]))
		}
		if simFlags.out == "" {
			return cli.Usage(fmt.Errorf("--out DIR is required"))
		}
		stop, err := startCPUProfile(simFlags.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
		start := time.Now()
		progress := func(d time.Duration, decisions int) {
			fmt.Fprintf(os.Stderr, "%s: simulated %v in %.1f s, %d decisions\n", sc.Name, d, time.Since(start).Seconds(), decisions)
		}
		res, err := sim.Run(sc, sim.Options{Nodes: simFlags.nodes, Ranges: simFlags.ranges, Duration: simFlags.duration,
			Seed: simFlags.seed, Workload: simFlags.workload, OnlyPolicyOn: simFlags.onlyOn, Wall: time.Now, Progress: progress})
		if err != nil {
			return err
		}
		if err := res.Write(simFlags.out); err != nil {
			return err
		}
		rep := res.Report
		for _, r := range rep.Runs {
			fmt.Printf("%s policy_on=%v: %.0f ops/s, p50 %.2f ms, p99 %.2f ms, %d errors\n", rep.Scenario, r.PolicyOn,
				r.Summary.Throughput, r.Summary.P50Ms, r.Summary.P99Ms, r.Summary.Errors)
			if x := r.Reads; x != nil {
				fmt.Printf("  %d learners (%.1f GB, %.3f replicas a range), hottest node %.0f reads/s (mean %.0f, utilization %.2f)\n",
					x.Learners, float64(x.LearnerBytes)/1e9, x.ReplicasPerRange, x.HottestNodeReads, x.MeanNodeReads, x.HottestNodeUtil)
			}
			for i, st := range r.Steps {
				fmt.Printf("  step %d: %s\n", i, st)
			}
			if s := r.AtSLO; s != nil {
				fmt.Printf("  at the SLO: %.0f ops/s served (step %d, p99 %.2f ms)\n", s.ServedOps, s.Step, s.P99Ms)
			}
		}
		fmt.Printf("simulated %v in %.1f s: %d events, %d snapshots, %d decisions (%.0f per second); wrote %s\n",
			time.Duration(rep.Settings.DurationS*float64(time.Second)), rep.Sim.WallS, rep.Sim.Events, rep.Sim.Snapshots,
			rep.Sim.Decisions, rep.Sim.DecisionsPerSec, simFlags.out)
		return nil
	},
}

var calibrateFlags struct {
	report, out, on, off string
	tolerance            float64
	seed                 uint64
}

var simCalibrateCmd = &cobra.Command{
	Use:   "calibrate --report REAL/report.json --out DIR",
	Short: "Simulate the scenario of a real run and compare the figures",
	Long: `Read the report.json of a real run ("shoal bench scenario NAME"), simulate the scenario of the
same name sized as the real run was (nodes, ranges, records, read fraction, duration and warm-up, event
times scaled as the real runner scales them) with the offered load the real run served before its first
event, and print each figure side by side with its relative error against --tolerance: throughput with
the policy on and off, each 10-s throughput bin after the warm-up (the worst as a figure), the p99 ratio
on/off, how long each task event took (a decommission: until its node held no replica), the seconds a
killed leader cost, and from the run's decision log (from the first event on) the decisions and the mean
duration per operator kind (proposal to the policy's next decision: the log has no end times), a join's
time and the first 20 decisions in order. Writes DIR/calibration.json and the simulation's report.json, decisions.json and plots.`,
	Example: "  shoal bench scenario decommission --out /tmp/decom-real\n" +
		"  shoal sim calibrate --report /tmp/decom-real/report.json --out /tmp/decom-cal\n" +
		"  shoal bench scenario join --variants incremental,no-join --duration 40s --out /tmp/join-real",
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		if calibrateFlags.report == "" || calibrateFlags.out == "" {
			return cli.Usage(fmt.Errorf("--report FILE and --out DIR are required"))
		}
		real, err := sim.ReadRealReport(calibrateFlags.report)
		if err != nil {
			return err
		}
		cal, err := sim.Calibrate(real, sim.CalibrateOptions{Seed: calibrateFlags.seed, Tolerance: calibrateFlags.tolerance,
			On: calibrateFlags.on, Off: calibrateFlags.off})
		if err != nil {
			return err
		}
		if err := cal.Write(calibrateFlags.out); err != nil {
			return err
		}
		if err := cal.WriteText(os.Stdout); err != nil {
			return err
		}
		fmt.Printf("wrote %s/calibration.json\n", calibrateFlags.out)
		return nil
	},
}

func init() {
	cf := simCalibrateCmd.Flags()
	cf.StringVar(&calibrateFlags.report, "report", "", "a real run's report.json (required)")
	cf.StringVar(&calibrateFlags.out, "out", "", "directory for calibration.json and the simulation's files (required)")
	cf.StringVar(&calibrateFlags.on, "on", "", "the real run compared with the policy-on simulation: a variant or policy=on (default: the first run with the policy on)")
	cf.StringVar(&calibrateFlags.off, "off", "", "the real run compared with the policy-off simulation (default: the first run with the policy off)")
	cf.Float64Var(&calibrateFlags.tolerance, "tolerance", sim.DefaultTolerance, "relative error allowed per figure")
	cf.Uint64Var(&calibrateFlags.seed, "seed", 1, "random seed of the simulation")
	simCmd.AddCommand(simCalibrateCmd)

	f := simCmd.Flags()
	f.IntVar(&simFlags.nodes, "nodes", 0, "nodes (default: the scenario's)")
	f.IntVar(&simFlags.ranges, "ranges", 0, "user ranges (default: the scenario's)")
	f.DurationVar(&simFlags.duration, "duration", 0, "simulated time (default: the scenario's)")
	f.Uint64Var(&simFlags.seed, "seed", 1, "random seed: the same seed gives the same run")
	f.StringVar(&simFlags.workload, "workload", "", "key distribution: uniform, zipfian, hotspot, latest (default: the scenario's)")
	f.StringVar(&simFlags.out, "out", "", "directory for report.json and decisions.json (required)")
	f.BoolVar(&simFlags.onlyOn, "policy-on-only", false, "skip the run with the scenario's policy off")
	f.StringVar(&simFlags.cpuProfile, "cpuprofile", "", "write a CPU profile of the simulation to this file")
}
