package benchcmd

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/mergeplan"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
)

var mergePlanFlags struct {
	experiment    string
	distributions []string
	reps          int
}

var benchMergePlanCmd = &cobra.Command{
	Use:   "merge-plan",
	Short: "The merge planner's strategies on YCSB key streams flushed into sorted runs (simulation)",
	Long: `Reproduce the simulation of Ghosh's thesis, chapter 5.4: a YCSB load of 1 000 records, then
inserts and updates (uniform, zipfian or latest keys) flushed from a memtable of a fixed number of
entries into sorted runs, merged by every strategy of the merge planner. --experiment updates varies
the update share from 0 to 100 % (100 000 operations, memtable 1 000: Figure 5.6); memtable varies the
memtable from 10 to 10 000 entries for 100 runs at 60 % updates (Figure 5.7). Each row is one plan:
its cost Σ|A_ν|, the keys it reads and writes, and the lower bound Σ|A_i|; with --reps R each
workload runs with R seeds. Prints a table, or JSON rows with --format json.`,
	Example: "  shoal bench merge-plan --experiment updates --distribution latest --reps 3",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		if mergePlanFlags.reps < 1 {
			return cli.Usage(fmt.Errorf("--reps must be at least 1"))
		}
		var rows []mergeplan.Row
		for _, dist := range mergePlanFlags.distributions {
			for rep := 0; rep < mergePlanFlags.reps; rep++ {
				var ws []mergeplan.Workload
				switch mergePlanFlags.experiment {
				case "updates":
					ws = mergeplan.UpdateSweep(dist, uint64(rep+1))
				case "memtable":
					ws = mergeplan.MemtableSweep(dist, uint64(rep+1))
				default:
					return cli.Usage(fmt.Errorf("--experiment %q: updates or memtable", mergePlanFlags.experiment))
				}
				for _, w := range ws {
					fmt.Fprintf(os.Stderr, "merge-plan: %s, %.0f%% updates, memtable %d, seed %d\n", w.Distribution,
						w.UpdateShare*100, w.Memtable, w.Seed)
					r, err := mergeplan.Simulate(w)
					if err != nil {
						return err
					}
					rows = append(rows, r...)
				}
			}
		}
		if cli.JSON() {
			return cli.PrintIndented(rows)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "dist\tupdates\tmemtable\tseed\truns\tstrategy\tcost\tio\tlower bound\tcost/LB\tplan ms\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%.0f%%\t%d\t%d\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.3f\t%.1f\t\n", r.Distribution, r.UpdateShare*100,
				r.Memtable, r.Seed, r.Runs, r.Strategy, r.Cost, r.IO, r.LowerBound, r.Cost/r.LowerBound, r.PlanMS)
		}
		return tw.Flush()
	},
}

func init() {
	f := benchMergePlanCmd.Flags()
	f.StringVar(&mergePlanFlags.experiment, "experiment", "updates", "updates (Figure 5.6) or memtable (Figure 5.7)")
	f.StringSliceVar(&mergePlanFlags.distributions, "distribution", []string{"latest"}, "key distributions: "+strings.Join([]string{"uniform", "zipfian", "latest"}, ", "))
	f.IntVar(&mergePlanFlags.reps, "reps", 1, "seeds per workload")
	benchCmd.AddCommand(benchMergePlanCmd)
}
