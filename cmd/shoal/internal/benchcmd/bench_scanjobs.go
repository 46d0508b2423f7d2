package benchcmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/scanjobs"
)

var scanJobsFlags scanjobs.Options

var benchScanJobsCmd = &cobra.Command{
	Use:   "scan-jobs",
	Short: "Recurring scan jobs over a YCSB-B load: demand reads, demand caching and the prefetch planner on emulated disks",
	Long: `Reproduce NetCachier's comparison (Ghosh 2018, §6.5) on in-process nodes with emulated disks (no
page cache, --disk-rate each, a block cache with --block-room for blocks beside its two memtables): --spans spans of --span-rows rows, --jobs count
jobs every --period over spans drawn by a Zipf popularity, deadlines in [--min-deadline,
--max-deadline], half the first runs at once and the rest spread over --stagger, under a YCSB-B foreground (95 % reads, 5 %
updates, Zipf over the rows) at --rate. One arm per --strategies entry, each on a fresh cluster:
no-jobs (the foreground alone), demand-reads, demand-caching, planner. Each arm is measured over
--measure from two periods after the jobs are added: runs due (on time, late, refused, skipped), jobs
with every run on time, the highest disk reads of one node in one second, the bytes the disks read,
the bytes runs read from copies, each node's block room and hit ratio, and the foreground's p50/p99. Prints JSON.`,
	Example: "  flock /tmp/bench.lock shoal bench scan-jobs --measure 45s",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := scanJobsFlags
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s scan-jobs: %s\n", time.Now().Format(time.TimeOnly), s) }
			return scanjobs.Run(cmd.Context(), dir, o)
		})
	},
}

func init() {
	f := benchScanJobsCmd.Flags()
	o := &scanJobsFlags
	d := scanjobs.Defaults()
	f.IntVar(&o.Nodes, "nodes", d.Nodes, "in-process nodes")
	f.IntVar(&o.Spans, "spans", d.Spans, "key spans the jobs read")
	f.IntVar(&o.SpanRows, "span-rows", d.SpanRows, "rows per span")
	f.IntVar(&o.ValueBytes, "value-bytes", d.ValueBytes, "bytes per value")
	f.IntVar(&o.Jobs, "jobs", d.Jobs, "scan jobs")
	f.DurationVar(&o.Period, "period", d.Period, "every job's period")
	f.DurationVar(&o.MinDeadline, "min-deadline", d.MinDeadline, "shortest deadline")
	f.DurationVar(&o.MaxDeadline, "max-deadline", d.MaxDeadline, "longest deadline")
	f.DurationVar(&o.Stagger, "stagger", d.Stagger, "half the jobs' first runs at once, the rest spread over this long")
	f.Int64Var(&o.JobRate, "job-rate", d.JobRate, "bytes/s a run reads its span at from disk")
	f.Int64Var(&o.DiskRate, "disk-rate", d.DiskRate, "each node's emulated disk read bandwidth (bytes/s)")
	f.Int64Var(&o.BlockRoomBytes, "block-room", d.BlockRoomBytes, "each node's block cache room for blocks (the cache is this plus its two 1-MiB memtables)")
	f.Int64Var(&o.CopyBytes, "copy-bytes", d.CopyBytes, "per node, the copies the jobs' plan may hold")
	f.IntVar(&o.Rate, "rate", d.Rate, "foreground operations per second")
	f.IntVar(&o.Clients, "clients", d.Clients, "foreground workers")
	f.DurationVar(&o.Measure, "measure", d.Measure, "the measured window of each arm")
	f.StringSliceVar(&o.Strategies, "strategies", nil, "arms to run (default no-jobs,demand-reads,demand-caching,planner)")
	f.Int64Var(&o.Seed, "seed", d.Seed, "seed of the job mix and the foreground")
	f.StringVar(&o.ProfileDir, "profile-dir", "", "write each arm's CPU profile of its window, and its mutex and heap profiles at the window's start and end, into this directory (none by default)")
	benchCmd.AddCommand(benchScanJobsCmd)
}
