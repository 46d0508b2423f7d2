package benchcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/linearroad"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
)

var linearRoadFlags struct {
	cfg        linearroad.Config
	arms       string
	cpuProfile string
}

var benchLinearRoadCmd = &cobra.Command{
	Use:   "linear-road",
	Short: "A Linear-Road-style stream job: tasks placed by hash, placed aligned once, and kept aligned by the controller, as arms of one run",
	Long: `Reproduce Amoeba's comparison (Papaioannou 2021, ch. 5, §5.4) on in-process nodes: vehicles send
position reports, each segment's task keeps the segment's statistics in Shoal (one key per segment,
the span split into --ranges ranges with leaders spread over the nodes) and answers a report that
enters the segment with a toll notification. Each arm of --arms runs on a fresh cluster, one after
the other, with the same placement changes (incremental_join and rebalance on; with --join-at a node
joins during the measured window):
  unaligned   each report goes to a node chosen by a hash of its segment (state mostly remote)
  placed      to the node that led its segment's range when first looked up, never migrated: aligned
              until a leadership moves, remote after
  controller  to the range's current leader (tasks follow every move), with the stream_align policy
              on: a range of at least --align-events events/s whose requests' p90 is over
              --align-latency is split at the median of its events' keys while a node is below
              --align-saturated utilization (all in-process nodes report the process's CPU)
  aligned     the controller's routing without the policy
Reports per arm events per second, toll notifications' p50/p99 (a batch's round trip), the share of
state accesses served locally, one-second bins of the measured window, the exactly-once checker's
verdict (each segment's stored statistics and each toll notification against a model advanced by the
acknowledged reports), and with --join-at the throughput before and after the join and the seconds
until alignment was back. Prints JSON, and a summary against the goals on stderr.`,
	Example: "  flock /tmp/bench.lock shoal bench linear-road --duration 30s --join-at 10s",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		var arms []linearroad.Arm
		for _, name := range strings.Split(linearRoadFlags.arms, ",") {
			a, err := linearroad.ParseArm(strings.TrimSpace(name))
			if err != nil {
				return cli.Usage(fmt.Errorf("--arms: %w", err))
			}
			arms = append(arms, a)
		}
		return inTempDir(func(dir string) (any, error) {
			var out []linearroad.Result
			for i, a := range arms {
				cfg := linearRoadFlags.cfg
				cfg.Arm, cfg.Dir = a, filepath.Join(dir, fmt.Sprintf("run%d", i))
				if p := linearRoadFlags.cpuProfile; p != "" {
					cfg.CPUProfile = p + "." + a.Name
				}
				cfg.Log = func(f string, args ...any) {
					fmt.Fprintf(os.Stderr, "%s linear-road %s: %s\n", time.Now().Format(time.TimeOnly), a.Name, fmt.Sprintf(f, args...))
				}
				r, err := linearroad.Run(cmd.Context(), cfg)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", a.Name, err)
				}
				cfg.Log("%.0f events/s, toll p99 %.1f ms, %.1f %% of state accesses local", r.EventsPerSec, r.TollP99Ms, 100*r.LocalShare)
				out = append(out, r)
			}
			for _, l := range linearroad.Summary(out) {
				fmt.Fprintln(os.Stderr, "linear-road summary:", l)
			}
			return out, nil
		})
	},
}

func init() {
	f := benchLinearRoadCmd.Flags()
	c := &linearRoadFlags.cfg
	f.StringVar(&linearRoadFlags.arms, "arms", "unaligned,placed,controller", "arms, in order: unaligned, placed, controller, aligned")
	f.IntVar(&c.Nodes, "nodes", 3, "in-process nodes")
	f.IntVar(&c.Ranges, "ranges", 0, "ranges of the segment span (0: two per node)")
	f.IntVar(&c.Vehicles, "vehicles", 4000, "vehicles")
	f.IntVar(&c.Xways, "xways", 1, "expressways")
	f.IntVar(&c.Segments, "segments", 40, "segments per expressway and direction")
	f.IntVar(&c.Senders, "senders", 16, "producer goroutines (each owns a share of the segments)")
	f.IntVar(&c.Batch, "batch", 64, "reports per ingest call at most")
	f.DurationVar(&c.Warmup, "warmup", 5*time.Second, "unmeasured start of each run")
	f.DurationVar(&c.Duration, "duration", 30*time.Second, "measured window of each run")
	f.DurationVar(&c.JoinAt, "join-at", 0, "add a node this far into the measured window (0: none)")
	f.Float64Var(&c.AlignEvents, "align-events", 0, "stream_align's floor in the controller arm, events/s per range (0: its default, 500)")
	f.DurationVar(&c.AlignLatency, "align-latency", 0, "stream_align's backlog latency, a range's p90, in the controller arm (0: its default, 20ms)")
	f.Uint64Var(&c.AlignSamples, "align-samples", 0, "sampled events a range's recent windows must hold before stream_align splits it, in the controller arm (0: its default, 256)")
	f.Float64Var(&c.AlignSaturated, "align-saturated", 0, "utilization at which stream_align deems a node saturated, in the controller arm (0: its default, 0.85; above 1: never)")
	f.StringVar(&linearRoadFlags.cpuProfile, "cpuprofile", "", "write a CPU profile of each arm's measured window to this file, suffixed with the arm's name")
	benchCmd.AddCommand(benchLinearRoadCmd)
}
