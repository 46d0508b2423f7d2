package benchcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/linearroad"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/stream"
)

var linearRoadFlags struct {
	cfg  linearroad.Config
	mode string
}

var benchLinearRoadCmd = &cobra.Command{
	Use:   "linear-road",
	Short: "A Linear-Road-style stream job with tasks aligned with the state's ranges against tasks placed by hash",
	Long: `Reproduce Amoeba's comparison (Papaioannou 2021, ch. 5, §5.4.2) on in-process nodes: vehicles send
position reports, each segment's task keeps the segment's statistics in Shoal (one key per segment,
the span split into --ranges ranges with leaders spread over the nodes) and answers a report that
enters the segment with a toll notification. --mode aligned sends each report to the node leading
its segment's range (state reads and writes local); unaligned to a node chosen by a hash of the
segment (state mostly remote, about 1/N local); both runs one after the other, each on a fresh
cluster. Reports events per second, toll notifications' p50/p99 (a batch's round trip) and the
share of state accesses served locally, over --duration after --warmup. Prints JSON.`,
	Example: "  flock /tmp/bench.lock shoal bench linear-road --mode both --duration 30s",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		var modes []stream.Mode
		switch linearRoadFlags.mode {
		case "both":
			modes = []stream.Mode{stream.Aligned, stream.Unaligned}
		default:
			m, err := stream.ParseMode(linearRoadFlags.mode)
			if err != nil {
				return cli.Usage(fmt.Errorf("--mode: %w (or both)", err))
			}
			modes = []stream.Mode{m}
		}
		return inTempDir(func(dir string) (any, error) {
			var out []linearroad.Result
			for i, m := range modes {
				cfg := linearRoadFlags.cfg
				cfg.Mode, cfg.Dir = m, filepath.Join(dir, fmt.Sprintf("run%d", i))
				cfg.Log = func(f string, a ...any) {
					fmt.Fprintf(os.Stderr, "%s linear-road %s: %s\n", time.Now().Format(time.TimeOnly), m, fmt.Sprintf(f, a...))
				}
				r, err := linearroad.Run(cmd.Context(), cfg)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", m, err)
				}
				cfg.Log("%.0f events/s, toll p99 %.1f ms, %.1f %% of state accesses local", r.EventsPerSec, r.TollP99Ms, 100*r.LocalShare)
				out = append(out, r)
			}
			return out, nil
		})
	},
}

func init() {
	f := benchLinearRoadCmd.Flags()
	c := &linearRoadFlags.cfg
	f.StringVar(&linearRoadFlags.mode, "mode", "both", "aligned, unaligned or both")
	f.IntVar(&c.Nodes, "nodes", 3, "in-process nodes")
	f.IntVar(&c.Ranges, "ranges", 0, "ranges of the segment span (0: two per node)")
	f.IntVar(&c.Vehicles, "vehicles", 4000, "vehicles")
	f.IntVar(&c.Xways, "xways", 1, "expressways")
	f.IntVar(&c.Segments, "segments", 40, "segments per expressway and direction")
	f.IntVar(&c.Senders, "senders", 16, "producer goroutines (each owns a share of the segments)")
	f.IntVar(&c.Batch, "batch", 64, "reports per ingest call at most")
	f.DurationVar(&c.Warmup, "warmup", 5*time.Second, "unmeasured start of each run")
	f.DurationVar(&c.Duration, "duration", 30*time.Second, "measured window of each run")
	benchCmd.AddCommand(benchLinearRoadCmd)
}
