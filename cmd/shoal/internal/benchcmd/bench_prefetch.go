package benchcmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/plan/prefetch"
)

var prefetchPlanFlags struct {
	seeds      int
	cacheShare float64
	slowdown   float64
}

// prefetchRow is one strategy on one generated mix.
type prefetchRow struct {
	Seed       uint64  `json:"seed"`
	CacheShare float64 `json:"cache_share"`
	Bandwidth  float64 `json:"disk_bandwidth"`
	prefetch.Result
	LowerBound float64 `json:"lower_bound"`
	Prefetches int     `json:"prefetches"`
	PlanMS     float64 `json:"plan_ms"`
}

var benchPrefetchPlanCmd = &cobra.Command{
	Use:   "prefetch-plan",
	Short: "The prefetch planner against demand reads and demand paging on generated scan-job mixes (simulation)",
	Long: `Compare, as in Ghosh's thesis, chapter 6.5, the prefetch planner (NetCachier) with demand reads
(RemoteRead) and demand paging with PACMan's LIFE eviction on a generated mix shaped like the chapter's
traces: 3 nodes, 30 spans of 16 MiB to 1 GiB read by 90 jobs every 1 or 2 hours, 6 hours in 5-minute
slots, disks of 400 MB/s of which the foreground takes up to 30 %. Each row is one strategy on one seed:
runs and jobs on time, the peak disk bandwidth the jobs take on one node, that peak over the LP lower
bound for the runs the strategy serves on time, and the bytes read from disk. --slowdown 80 divides the disk
bandwidth for the high-load regime, where jobs miss deadlines; --cache-share sizes each node's cache
as a share of the spans its jobs read. Prints a table, or JSON rows with --format json.`,
	Example: "  shoal bench prefetch-plan --seeds 3\n  shoal bench prefetch-plan --seeds 3 --slowdown 80",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := prefetchPlanFlags
		if f.seeds < 1 || f.slowdown < 1 || f.cacheShare < 0 {
			return cli.Usage(fmt.Errorf("--seeds and --slowdown must be at least 1, --cache-share at least 0"))
		}
		var rows []prefetchRow
		for seed := uint64(1); seed <= uint64(f.seeds); seed++ {
			cfg := prefetch.DefaultMix(seed)
			cfg.CacheShare, cfg.Bandwidth = f.cacheShare, cfg.Bandwidth/f.slowdown
			in, err := prefetch.Mix(cfg)
			if err != nil {
				return err
			}
			mix, err := prefetchMix(&in, seed, cfg)
			if err != nil {
				return err
			}
			rows = append(rows, mix...)
		}
		if cli.JSON() {
			return cli.PrintIndented(rows)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "seed\tcache\tdisk MB/s\tstrategy\truns on time\tjobs on time\tpeak MB/s\tpeak/LB\tGB read\tprefetches\tplan ms\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%.1f×\t%.0f\t%s\t%d/%d\t%d/%d\t%.2f\t%.2f\t%.1f\t%d\t%.1f\t\n", r.Seed, r.CacheShare, r.Bandwidth/1e6,
				r.Strategy, r.OnTime, r.Runs, r.JobsOnTime, r.Jobs, r.Peak/1e6, r.Peak/r.LowerBound, r.DiskBytes/1e9, r.Prefetches, r.PlanMS)
		}
		return tw.Flush()
	},
}

// prefetchMix plans one mix with every strategy; each row's LP bound is over the runs its strategy
// serves on time.
func prefetchMix(in *prefetch.Instance, seed uint64, cfg prefetch.MixConfig) ([]prefetchRow, error) {
	var rows []prefetchRow
	for _, s := range prefetch.Strategies {
		start := time.Now()
		sc, err := prefetch.Make(in, s, prefetch.Options{})
		if err != nil {
			return nil, err
		}
		ms := float64(time.Since(start).Microseconds()) / 1e3
		res, err := prefetch.Evaluate(in, &sc)
		if err != nil {
			return nil, err
		}
		lb, err := prefetch.LowerBound(in, prefetch.Options{}, res.RunOnTime)
		if err != nil {
			return nil, fmt.Errorf("prefetch-plan: seed %d, %s: %w", seed, s, err)
		}
		rows = append(rows, prefetchRow{Seed: seed, CacheShare: cfg.CacheShare, Bandwidth: cfg.Bandwidth, Result: res,
			LowerBound: lb, Prefetches: len(sc.Prefetches()), PlanMS: ms})
	}
	return rows, nil
}

func init() {
	f := benchPrefetchPlanCmd.Flags()
	f.IntVar(&prefetchPlanFlags.seeds, "seeds", 3, "mixes to generate, seeded 1..N")
	f.Float64Var(&prefetchPlanFlags.cacheShare, "cache-share", 1, "each node's cache as a share of the spans its jobs read")
	f.Float64Var(&prefetchPlanFlags.slowdown, "slowdown", 1, "divide the disks' bandwidth by this (80: the high-load regime)")
	benchCmd.AddCommand(benchPrefetchPlanCmd)
}
