package benchcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

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
// the nodes' data; DIR/report.json is bench profiles' JSON.
func runNodeProfilesScenario(cmd *cobra.Command) error {
	for _, name := range []string{"duration", "rate", "splits", "surge-threads", "no-emulated-disk", "variants", "hosts", "pairs", "window", "skip", "repeat"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply to %s (its settings: shoal bench profiles --help)", name, nodeProfilesScenario)
		}
	}
	fl := scenarioFlags
	if fl.out == "" {
		return fmt.Errorf("--out is required")
	}
	if err := os.MkdirAll(fl.out, 0o755); err != nil {
		return err
	}
	dir, cleanup, err := scenarioDataDir(fl.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	o := nodeProfilesOptions()
	o.Records, o.Threads = int64(fl.records), fl.threads
	o.Progress = func(s string) {
		fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format(time.TimeOnly), nodeProfilesScenario, s)
	}
	fmt.Fprintf(os.Stderr, "scenario %s: %s; data in %s\n", nodeProfilesScenario, nodeProfilesDescription, dir)
	rep, err := profiles.Run(cmd.Context(), dir, o)
	if err != nil {
		return err
	}
	path := filepath.Join(fl.out, "report.json")
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	printProfilesSummary(cmd.OutOrStdout(), rep)
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", path)
	return nil
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
