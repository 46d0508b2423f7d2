package benchcmd

import (
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/core"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table/rekey"
)

var coreBenchFlags struct {
	threads   int
	value     int
	seconds   time.Duration
	ranges    int
	phases    []string
	transfers int
	writers   int // leader-switch's --threads (group-commit's default differs)
}

var benchGroupCommitCmd = &cobra.Command{
	Use:   "group-commit",
	Short: "Durable write throughput of one node against raw synced Pebble batches on the same disk",
	Long: `Measure the group-commit ceiling: first --threads writers each commit their own synced Pebble
batch (Pebble groups concurrent fsyncs: the best one engine does on this disk), then the same writers
put keys through a one-node Shoal: first through the node's API in process, then through gRPC on
loopback (raft log, one fsync per log batch, apply). Each run uses a fresh directory under $TMPDIR
and lasts --duration; --phases picks some of them (raw alone is the disk's synced-write ceiling at
that concurrency). Each phase reports the process's CPU time and read/write system calls per write.
Prints JSON.`,
	Example: "  shoal bench group-commit --threads 64 --duration 10s\n  shoal bench group-commit --phases raw --threads 32 --value-bytes 1100",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			fmt.Fprintf(os.Stderr, "group-commit: %d writers, %v per run, data in %s\n", coreBenchFlags.threads, coreBenchFlags.seconds, dir)
			stop, err := startCPUProfile(os.Getenv("SHOAL_CPUPROFILE"))
			if err != nil {
				return nil, err
			}
			defer stop()
			return core.GroupCommit(cmd.Context(), dir, coreBenchFlags.threads, coreBenchFlags.value, coreBenchFlags.seconds, coreBenchFlags.phases...)
		})
	},
}

var benchIdleRangesCmd = &cobra.Command{
	Use:   "idle-ranges",
	Short: "Memory per idle range and idle CPU of a node holding many ranges",
	Long: `Create a node whose store holds --ranges ranges, wait until they have elected leaders and
quiesced (idle ranges stop ticking and heartbeating), then report heap bytes per range and the
process's CPU over --duration of idleness. Prints JSON.`,
	Example: "  shoal bench idle-ranges --ranges 10000 --duration 10s",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			fmt.Fprintf(os.Stderr, "idle-ranges: %d ranges, data in %s\n", coreBenchFlags.ranges, dir)
			return core.IdleRanges(cmd.Context(), dir, coreBenchFlags.ranges, coreBenchFlags.seconds)
		})
	},
}

var benchLeaderSwitchCmd = &cobra.Command{
	Use:   "leader-switch",
	Short: "Client-side unavailability of a range while its leadership moves to another node",
	Long: `Start three in-process nodes, keep --threads writers on one range, and move the range's
leadership to another voter --transfers times, 1.5 s apart (the autopilot's own moves switched off).
For each transfer, the longest gap between two successful writes in the second after it starts is
set against the longest gap in the second before it (the load's own jitter); the difference is the
unavailability the switch costs its clients. Prints JSON: median, p90 and max over the transfers.`,
	Example: "  shoal bench leader-switch --transfers 20 --threads 8",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		if coreBenchFlags.transfers < 1 || coreBenchFlags.writers < 1 {
			return cli.Usage(fmt.Errorf("--transfers and --threads must be positive"))
		}
		return inTempDir(func(dir string) (any, error) {
			fmt.Fprintf(os.Stderr, "leader-switch: %d transfers, %d writers, data in %s\n", coreBenchFlags.transfers, coreBenchFlags.writers, dir)
			return core.LeaderSwitch(cmd.Context(), dir, coreBenchFlags.transfers, coreBenchFlags.writers)
		})
	},
}

var rekeyBenchFlags struct {
	cfg        core.RekeyConfig
	cpuProfile string
}

var benchRekeyCmd = &cobra.Command{
	Use:   "rekey",
	Short: "Online re-key of a table under load, against a plain copy of the table",
	Long: `Start three in-process nodes (on emulated disks with --emulated-disk), load a table of --rows rows
of about --row-bytes bytes (id, grp, a 64-byte string and two fillers), and time a plain copy of it
(scan, then write into a new table, four batches in flight). Then re-key it from (id) to (grp, id)
under --rate operations a second (40 % reads, 40 % updates, 20 % inserts, open loop, rows chosen by
--distribution), back to (id), and to (grp, id) again under 20 × --rate, each re-key placing its new keyspace by
--placement. With --check-rows N, four more clients read and write N rows the load leaves alone, and
porcupine checks their history across both cutovers. Prints JSON: each re-key's time, its placement
(every plan's predicted bytes moved), how long writes were held, the reads and writes tried and
succeeded while it ran, p99 overall and while writes were held, porcupine's verdict, the ratio of
the first re-key's time to its cutover to the copy's and of the third's to the first's.`,
	Example: `  shoal bench rekey --rows 100000 --rate 100
  shoal bench rekey --rows 1000000 --row-bytes 1100 --emulated-disk --distribution zipfian --check-rows 16`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		cfg := rekeyBenchFlags.cfg
		switch {
		case cfg.Rows < 1 || cfg.Rate < 1:
			return cli.Usage(fmt.Errorf("--rows and --rate must be positive"))
		case cfg.RowBytes < 120:
			return cli.Usage(fmt.Errorf("--row-bytes %d: a row takes at least 120 bytes", cfg.RowBytes))
		case cfg.CheckRows < 0 || cfg.CheckRows > cfg.Rows/2:
			return cli.Usage(fmt.Errorf("--check-rows %d: between 0 and half the rows", cfg.CheckRows))
		case !slices.Contains(rekey.Placements(), cfg.Placement):
			return cli.Usage(fmt.Errorf("--placement %q: want one of %s", cfg.Placement, strings.Join(rekey.Placements(), ", ")))
		case !slices.Contains([]string{core.DistUniform, core.DistZipfian, core.DistLatest}, cfg.Dist):
			return cli.Usage(fmt.Errorf("--distribution %q: want uniform, zipfian or latest", cfg.Dist))
		}
		stop, err := startCPUProfile(rekeyBenchFlags.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Progress = func(s string) { fmt.Fprintln(os.Stderr, "rekey: "+s) }
		return inTempDir(func(dir string) (any, error) {
			fmt.Fprintf(os.Stderr, "rekey: %d rows of ~%d bytes, %d ops/s %s, placement %s, data in %s\n", cfg.Rows, cfg.RowBytes, cfg.Rate, cfg.Dist, cfg.Placement, dir)
			return core.Rekey(cmd.Context(), dir, cfg)
		})
	},
}

// inTempDir runs a benchmark in a fresh directory under $TMPDIR, removed afterwards, and prints its
// report as JSON.
func inTempDir(run func(dir string) (any, error)) error {
	dir, err := benchutil.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rep, err := run(dir)
	if err != nil {
		return err
	}
	return cli.PrintIndented(rep)
}

// startCPUProfile writes a CPU profile to path until stop is called; with path empty it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func init() {
	for _, c := range []*cobra.Command{benchGroupCommitCmd, benchIdleRangesCmd} {
		c.Flags().DurationVar(&coreBenchFlags.seconds, "duration", 10*time.Second, "length of each measured run")
	}
	benchGroupCommitCmd.Flags().IntVar(&coreBenchFlags.threads, "threads", 64, "concurrent writers")
	benchGroupCommitCmd.Flags().IntVar(&coreBenchFlags.value, "value-bytes", 100, "value size")
	benchGroupCommitCmd.Flags().StringSliceVar(&coreBenchFlags.phases, "phases", nil, "phases to run, of "+strings.Join(core.Phases(), ",")+" (default: all)")
	benchIdleRangesCmd.Flags().IntVar(&coreBenchFlags.ranges, "ranges", 10000, "idle ranges on the node")
	benchLeaderSwitchCmd.Flags().IntVar(&coreBenchFlags.transfers, "transfers", 20, "leadership transfers to measure")
	benchLeaderSwitchCmd.Flags().IntVar(&coreBenchFlags.writers, "threads", 8, "concurrent writers on the range")
	rf := benchRekeyCmd.Flags()
	rf.IntVar(&rekeyBenchFlags.cfg.Rows, "rows", 100000, "rows in the table")
	rf.IntVar(&rekeyBenchFlags.cfg.RowBytes, "row-bytes", 218, "about how many bytes a row takes, key and value")
	rf.IntVar(&rekeyBenchFlags.cfg.Rate, "rate", 100, "foreground operations a second during the first re-key (20× during the second)")
	rf.StringVar(&rekeyBenchFlags.cfg.Dist, "distribution", core.DistUniform, "rows the foreground reads and updates: uniform, zipfian or latest")
	rf.StringVar(&rekeyBenchFlags.cfg.Placement, "placement", rekey.PlaceBalanced, "the re-keys' placement of the new keyspace: "+strings.Join(rekey.Placements(), ", "))
	rf.BoolVar(&rekeyBenchFlags.cfg.Disk, "emulated-disk", false, "each node on an emulated disk (no page cache, 64 MiB/s, 2 000 IOPS)")
	rf.IntVar(&rekeyBenchFlags.cfg.CheckRows, "check-rows", 0, "rows a porcupine-checked client reads and writes across the cutovers (0: none)")
	rf.StringVar(&rekeyBenchFlags.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (cluster, load and re-keys) to this file")
	benchCmd.AddCommand(benchGroupCommitCmd, benchIdleRangesCmd, benchLeaderSwitchCmd, benchRekeyCmd)
}
