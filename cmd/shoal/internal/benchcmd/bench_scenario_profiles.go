package benchcmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/profiles"
)

// nodeProfilesScenario is MeT's experiment (bench/profiles) under `shoal bench scenario`: its arms
// are whole clusters reconfigured between windows, several tenants each with its own mix, which
// the declarative scenario table (one workload, events at offsets, a policy on then off) does not
// describe, so its runner is bench/profiles' own, with the settings docs/design/profiles.md reports.
const nodeProfilesScenario = "node-profiles"

// nodeProfilesDescription is its line in `shoal bench scenario list`.
const nodeProfilesDescription = "MeT's experiment (Cruz 2016, ch. 3): YCSB A-F tenants on 5 nodes at 150 IOPS; random-homogeneous, " +
	"each homogeneous profile, and node_profiles (its reconfiguration's 10-s bins, then the converged cluster); " +
	"same as shoal bench profiles --warmup 20s --settle 8s --measure 15s --converge 600s --disk-iops 150 --disk-bandwidth 104857600"

// nodeProfilesOptions are the experiment's settings as the design note reports them.
func nodeProfilesOptions() profiles.Options {
	d := profiles.Disk
	d.IOPS, d.ReadBytesPerSec, d.WriteBytesPerSec = 150, 100<<20, 100<<20
	return profiles.Options{
		Device: &d, Warmup: 20 * time.Second, Settle: 8 * time.Second, Measure: 15 * time.Second,
		Converge: 10 * time.Minute,
	}
}

// runNodeProfilesScenario runs it: --records and --threads (per tenant) apply, --data-dir keeps
// the nodes' data; DIR/report.json is bench profiles' JSON. With --repeat N it runs N times on fresh
// clusters (DIR/rep-1 … DIR/rep-N) and writes DIR/repeat.json: each goal figure's median and range,
// judged on the median (profiles.Summarize).
func runNodeProfilesScenario(cmd *cobra.Command) error {
	for _, name := range []string{"duration", "rate", "splits", "surge-threads", "no-emulated-disk", "variants", "hosts", "pairs", "window", "skip"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply to %s (its settings: shoal bench profiles --help)", name, nodeProfilesScenario)
		}
	}
	fl := scenarioFlags
	if fl.out == "" {
		return fmt.Errorf("--out is required")
	}
	if fl.repeat < 1 {
		return fmt.Errorf("--repeat %d: want at least 1", fl.repeat)
	}
	dir, cleanup, err := scenarioDataDir(fl.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(os.Stderr, "scenario %s: %s; data in %s\n", nodeProfilesScenario, nodeProfilesDescription, dir)
	out := cmd.OutOrStdout()
	if fl.repeat == 1 {
		rep, err := runNodeProfilesOnce(cmd, dir, fl.out, "")
		if err != nil {
			return err
		}
		printProfilesSummary(out, rep)
		fmt.Fprintf(out, "wrote %s\n", filepath.Join(fl.out, "report.json"))
		return nil
	}
	var reps []profiles.Report
	for i := 1; i <= fl.repeat; i++ {
		name := fmt.Sprintf("rep-%d", i)
		data := filepath.Join(dir, name)
		rep, err := runNodeProfilesOnce(cmd, data, filepath.Join(fl.out, name), fmt.Sprintf("%d/%d ", i, fl.repeat))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if fl.dir == "" { // the next run needs the disk more than this one's stores, unless --data-dir asked to keep them
			if err := os.RemoveAll(data); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%s:\n", name)
		printProfilesSummary(out, rep)
		reps = append(reps, rep)
	}
	sum := profiles.Summarize(reps)
	if err := sum.Print(out); err != nil {
		return err
	}
	path := filepath.Join(fl.out, "repeat.json")
	if err := sum.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s and %d reports under %s/rep-*\n", path, len(reps), fl.out)
	return nil
}

// runNodeProfilesOnce runs the experiment once with its nodes under dataDir and writes
// out/report.json; label prefixes its progress lines (which repetition).
func runNodeProfilesOnce(cmd *cobra.Command, dataDir, out, label string) (profiles.Report, error) {
	for _, d := range []string{out, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return profiles.Report{}, err
		}
	}
	o := nodeProfilesOptions()
	o.Records, o.Threads = int64(scenarioFlags.records), scenarioFlags.threads
	o.Progress = func(s string) {
		fmt.Fprintf(os.Stderr, "%s %s%s: %s\n", time.Now().Format(time.TimeOnly), label, nodeProfilesScenario, s)
	}
	rep, err := profiles.Run(cmd.Context(), dataDir, o)
	if err != nil {
		return rep, err
	}
	return rep, benchutil.WriteJSON(filepath.Join(out, "report.json"), rep)
}

// printProfilesSummary prints each arm's throughput and node_profiles' gains and cost.
func printProfilesSummary(w io.Writer, rep profiles.Report) {
	for _, a := range rep.Arms {
		fmt.Fprintf(w, "%s: %.0f ops/s, %d errors\n", a.Name, a.Throughput, a.Errors)
	}
	g := rep.Gains
	fmt.Fprintf(w, "node_profiles: %.2fx the best homogeneous (%s), %.2fx random-homogeneous, scan tenant %.2fx\n",
		g["over_best_homogeneous"], rep.BestHomogeneous, g["over_random_homogeneous"], g["scan_tenant_over_best_homogeneous"])
	rc := rep.Reconfiguration
	fmt.Fprintf(w, "reconfiguration: %.0f s, converged %v, lowest 10-s bin %.0f %% of %.0f ops/s, %d failed; %d failed over the run\n",
		rc.TookS, rc.Converged, rc.MinShare*100, rc.BeforeOpsS, rc.Errors, rep.Failed)
}
