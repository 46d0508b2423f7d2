package benchcmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/hotspot"
)

var hotspotFlags hotspot.Options

var benchHotspotCmd = &cobra.Command{
	Use:   "hotspot",
	Short: "Hot spots of several durations with the offload off, on, and decided by the online break-even: penalty per arm",
	Long: `Reproduce the hot-spot offload experiment (Bekas 2017, chapters 3 and 5) on --nodes in-process nodes
with emulated disks (--iops each, bandwidth unbounded, no page cache, --block-room of cache for
blocks, small beside each node's data, so most reads reach the disk):
--ranges ranges of --keys keys read at --rate reads/s each (an open loop, latency from each read's
scheduled time); the --hot-ranges ranges of one node's prefix get --factor times their load for each
--durations D. Each D runs off (hotspot_offload observing only) then on (offloading every hot spot);
then each D again decided online (the policy's break-even, fitted from what it measured). Each arm:
the penalty P = Σ max(0, p99 − SLO) over 500 ms windows from the hot spot's start to --tail after
its end, when the policy detected it, its operators and log lines. The online choice is correct when
it acted exactly where on's penalty was below off's. Prints JSON.`,
	Example: "  flock /tmp/bench.lock shoal bench hotspot --durations 2s,5s,15s,60s > hotspot.json",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := hotspotFlags
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s hotspot: %s\n", time.Now().Format(time.TimeOnly), s) }
			return hotspot.Run(cmd.Context(), dir, o)
		})
	},
}

func init() {
	f := benchHotspotCmd.Flags()
	o := &hotspotFlags
	f.IntVar(&o.Nodes, "nodes", 5, "in-process nodes")
	f.IntVar(&o.Ranges, "ranges", 10, "user ranges")
	f.IntVar(&o.HotRanges, "hot-ranges", 3, "ranges of the hot prefix, all led by one node")
	f.IntVar(&o.KeysPerRange, "keys", 1000, "keys per range")
	f.IntVar(&o.ValueBytes, "value-bytes", 1024, "bytes per value")
	f.Int64Var(&o.BlockRoomBytes, "block-room", 512<<10, "each node's block cache's room for blocks (the cache is this and the two 1 MiB memtables Pebble charges to it)")
	f.IntVar(&o.IOPS, "iops", 400, "each node's emulated disk operations per second")
	f.IntVar(&o.Rate, "rate", 15, "reads per second of each range at rest")
	f.Float64Var(&o.Factor, "factor", 10, "the hot prefix's load, times its rate at rest")
	f.DurationSliceVar(&o.Durations, "durations", []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second, 60 * time.Second}, "hot spot durations")
	f.DurationVar(&o.Gap, "gap", 8*time.Second, "at rest before each hot spot")
	f.DurationVar(&o.Tail, "tail", 5*time.Second, "measured after each hot spot's end")
	f.DurationVar(&o.SLO, "slo", 50*time.Millisecond, "the latency the penalty counts from (and the policy's), at least: twice the p99 at rest if that is higher")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	benchCmd.AddCommand(benchHotspotCmd)
}
