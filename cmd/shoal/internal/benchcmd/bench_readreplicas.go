package benchcmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/readreplicas"
)

var readReplicasFlags readreplicas.Options

var benchReadReplicasCmd = &cobra.Command{
	Use:   "read-replicas",
	Short: "Learners placed by popularity (read_replicas) against the same learners on every range: learner bytes and read p99",
	Long: `Reproduce Getafix's comparison with uniform replication (Ghosh 2018, §4.5.2) on in-process
nodes with emulated disks (no page cache, a block cache with --block-room for blocks beside its two
memtables, a small part of a node's data, so reads reach the disk): --ranges
ranges of --keys keys, read at any replica (client.ReplicaRead, routed by load) at a fixed --rate,
zipfian over the ranges (--zipf) and uniform within one; every arm on the same placement, the
voters and leaders spread over all nodes before the load. Arms, each on a fresh cluster: popularity
(the read_replicas policy switched on; measured once its learners stay put for 20 s, at most
--settle) and uniform-k for each --uniform k (k learners on every range, the policy off). Each arm
reports its learners, the bytes they hold, each node's reads per second, block room and hit ratio,
and the p50/p99 of the reads
over --measure, timed from each read's scheduled start. Then the hot set moves (the ranges' ranks
rotate by half) and each arm is followed for --shift: p99 per 1-s window, the seconds until it is
back within twice the p99 before the move, where the reads went over its last 10 s, and the
learners at the end. Prints JSON.`,
	Example: "  flock /tmp/bench.lock shoal bench read-replicas --measure 20s --uniform 0,1,2",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := readReplicasFlags
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s read-replicas: %s\n", time.Now().Format(time.TimeOnly), s) }
			return readreplicas.Run(cmd.Context(), dir, o)
		})
	},
}

func init() {
	f := benchReadReplicasCmd.Flags()
	o := &readReplicasFlags
	f.IntVar(&o.Nodes, "nodes", 5, "in-process nodes")
	f.IntVar(&o.Ranges, "ranges", 16, "user ranges")
	f.IntVar(&o.KeysPerRange, "keys", 2000, "keys per range")
	f.IntVar(&o.ValueBytes, "value-bytes", 1024, "bytes per value")
	f.Int64Var(&o.BlockRoomBytes, "block-room", 512<<10, "each node's block cache room for blocks (the cache is this plus its two 1-MiB memtables)")
	f.IntVar(&o.IOPS, "iops", 250, "each node's emulated disk operations per second (its read capacity past the cache)")
	f.IntVar(&o.Rate, "rate", 1000, "replica reads per second, in every arm (1000: about 76 % of the five disks' operations)")
	f.Float64Var(&o.Zipf, "zipf", 2, "skew of the ranges' popularity (> 1)")
	f.DurationVar(&o.Settle, "settle", 90*time.Second, "the most the policy gets to place its learners")
	f.DurationVar(&o.Measure, "measure", 20*time.Second, "the measured window of each arm")
	f.IntSliceVar(&o.Uniform, "uniform", []int{0, 1, 2}, "learners per range of the uniform arms (0: the voters alone)")
	f.DurationVar(&o.Shift, "shift", time.Minute, "how long each arm is followed after its hot set moves")
	f.BoolVar(&o.NoPopularity, "no-popularity", false, "skip the read_replicas arm (the uniform arms alone)")
	f.Uint64Var(&o.Seed, "seed", 2380, "seed of the ranks and the keys (2380: the hottest ranges share three voters, before and after the move)")
	benchCmd.AddCommand(benchReadReplicasCmd)
}
