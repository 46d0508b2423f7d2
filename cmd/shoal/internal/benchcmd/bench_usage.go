package benchcmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/usage"
)

var (
	usageTrainFlags usage.Options
	usageTrainOut   string
)

var benchUsageTrainCmd = &cobra.Command{
	Use:   "usage-train",
	Short: "Train the resource-usage model (plan/usage) on this machine's emulated disks",
	Long: `Train the usage model that usage_balance and the nodes' predicted usage use, by the procedure of
Cruz 2016, §5.3.1, scaled to in-process nodes on emulated disks: uniform reads over key prefixes
sized for cache hit ratios from 100 % down to about 15 %, then writes and scans (read hints off);
for each, an unpaced probe finds saturation and a binary search of the offered rate finds each usage
level (--levels) between idle and saturation; every probe, the idle one too, is a sample (load,
observed hit ratio, measured usage: the process's CPU share plus the nodes' disk busy). The samples
are fitted two ways — a node's idle usage fixed at the idle probe's, or fitted too (it then carries
the nodes' background under load) — and the fit whose leave-one-out error over the loaded probes is
the least is written to --out, a versioned file that ` + "`shoal start --usage-model FILE`" + ` loads.
With --validate-rates, the accuracy experiment follows on the same cluster: the read workloads on
the store as the training left it, then again compacted, then the mixes; every fit is scored.
Prints JSON: the model, every probe, each fit's held-out and own-sample errors, and the accuracy
checks.`,
	Example: "  flock /tmp/bench.lock shoal bench usage-train --out usage-model.json",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := usageTrainFlags
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s usage-train: %s\n", time.Now().Format(time.TimeOnly), s) }
			rep, err := usage.Run(cmd.Context(), dir, o)
			if err != nil {
				return rep, err
			}
			if usageTrainOut != "" {
				if err := rep.Model.Save(usageTrainOut); err != nil {
					return rep, fmt.Errorf("save the model: %w", err)
				}
			}
			return rep, nil
		})
	},
}

func init() {
	f := benchUsageTrainCmd.Flags()
	o := &usageTrainFlags
	f.StringVar(&usageTrainOut, "out", "usage-model.json", "the model file to write (empty: print only)")
	f.IntVar(&o.Nodes, "nodes", 3, "in-process nodes")
	f.IntVar(&o.Records, "records", 40000, "records loaded")
	f.IntVar(&o.ValueBytes, "value-bytes", 1000, "bytes of a value")
	f.Int64Var(&o.CacheBytes, "cache-bytes", 4<<20, "each node's block cache")
	f.Float64SliceVar(&o.Hits, "hits", []float64{1, 0.7, 0.4, 0.15}, "targeted hit ratios of the read probes")
	f.Float64SliceVar(&o.Levels, "levels", []float64{0.3, 0.6}, "usage levels each search looks for, as shares of the way from the idle cluster's usage to saturation")
	f.DurationVar(&o.Probe, "probe", 3*time.Second, "one probe's measured window")
	f.IntVar(&o.Steps, "steps", 4, "probes of each binary search")
	f.IntVar(&o.Clients, "clients", 32, "concurrent clients")
	f.Float64SliceVar(&o.ValidateRates, "validate-rates", nil, "after training, the accuracy experiment at these offered rates (ops/s): uniform, zipfian, zipf-clustered and hotspot reads, a 50/50 read/write mix and a scan-heavy mix, each predicted against measured")
	benchCmd.AddCommand(benchUsageTrainCmd)
}

var usageBalanceFlags usage.BalanceOptions

var benchUsageBalanceCmd = &cobra.Command{
	Use:   "usage-balance",
	Short: "usage_balance against rebalance on two tenants that differ in cache behaviour: throughput at a p99 SLO",
	Long: `The balancer experiment of the usage model (Cruz 2016, §6.3), on in-process nodes with emulated
disks: a hot tenant reads a few thousand records that every cache holds, a cold tenant reads
uniformly over records far larger than a cache (its reads miss); every range is offered the same
reads per second and every node leads as many ranges, the first only cold ones: by QPS and counts
the cluster is balanced (rebalance leaves it so), by usage the first node carries most of the
misses. Two arms of one run, each from that placement: rebalance alone (usage_balance off), then
usage_balance on. Each settles at --settle-rate, then steps the offered rate a range through
--range-rates until a step misses the SLO twice in a row (each tenant's p99 ≤ --slo-p99 and ≥
--slo-served of its offered reads served); the arm's throughput at the SLO is its last step that
met it. Prints JSON:
every step's throughput and p99 per tenant, the leaders by tenant and node, the nodes' predicted
usage, the decisions of each arm, and usage_balance's gain at the SLO.`,
	Example: "  flock /tmp/bench.lock shoal bench usage-balance",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := usageBalanceFlags
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s usage-balance: %s\n", time.Now().Format(time.TimeOnly), s) }
			return usage.Balance(cmd.Context(), dir, o)
		})
	},
}

func init() {
	f := benchUsageBalanceCmd.Flags()
	o := &usageBalanceFlags
	f.IntVar(&o.Nodes, "nodes", 3, "in-process nodes")
	f.IntVar(&o.HotRecords, "hot-records", 2000, "records of the hot tenant")
	f.IntVar(&o.ColdRecords, "cold-records", 30000, "records of the cold tenant")
	f.IntVar(&o.HotRanges, "hot-ranges", 6, "ranges of the hot tenant")
	f.IntVar(&o.ColdRanges, "cold-ranges", 6, "ranges of the cold tenant (the first node leads only cold ones at each arm's start)")
	f.Float64SliceVar(&o.RangeRates, "range-rates", []float64{30, 45, 60, 80, 100, 130, 160, 200, 250}, "reads per second offered to every range at each step, ascending")
	f.Float64Var(&o.SettleRate, "settle-rate", 60, "reads per second offered to every range while an arm settles")
	f.IntVar(&o.Clients, "clients", 32, "paced clients per tenant")
	f.Int64Var(&o.CacheBytes, "cache-bytes", 4<<20, "each node's block cache")
	f.IntVar(&o.Device.IOPS, "iops", 400, "each node's emulated disk's operations per second")
	f.DurationVar(&o.Settle, "settle", 45*time.Second, "each arm's run at --settle-rate before its steps")
	f.DurationVar(&o.Warm, "warm", 5*time.Second, "each step's run before its window")
	f.DurationVar(&o.Window, "window", 15*time.Second, "each step's measured window")
	f.DurationVar(&o.SLOP99, "slo-p99", 100*time.Millisecond, "the SLO: each tenant's p99 at most this")
	f.Float64Var(&o.SLOServed, "slo-served", 0.95, "the SLO: each tenant served at least this share of its offered reads")
	benchCmd.AddCommand(benchUsageBalanceCmd)
}
