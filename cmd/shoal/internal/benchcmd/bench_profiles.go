package benchcmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/profiles"
)

var profilesFlags profiles.Options

var profilesDisk struct {
	iops      int
	bandwidth int64
}

var benchProfilesCmd = &cobra.Command{
	Use:   "profiles",
	Short: "Workload-aware node profiles (node_profiles) against homogeneous clusters, on YCSB tenants A–F",
	Long: `Reproduce MeT's comparison (Cruz 2016, chapter 3) on in-process nodes with emulated disks: the
--tenants YCSB workloads run at once, each on its own key prefix split into --splits ranges, through
every arm of one run: random-homogeneous (every node the readwrite profile, leaders drawn at random),
homogeneous-P for each profile P (leaders spread by load), and node_profiles (from random-homogeneous,
the policy switched on: its reconfiguration's 10-s bins against the level before it, then the
converged cluster). Nodes change profile by the in-process rolling restart. Prints JSON: each arm's
throughput (total and per tenant), the best homogeneous arm, node_profiles' gains, the
reconfiguration's cost and the failed operations (during it, in each arm, over the run).`,
	Example: "  flock /tmp/bench.lock shoal bench profiles --records 20000 --measure 30s\n  flock /tmp/bench.lock shoal bench profiles --homogeneous read,write --no-node-profiles",
	Args:    cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return inTempDir(func(dir string) (any, error) {
			o := profilesFlags
			d := profiles.Disk
			d.IOPS, d.ReadBytesPerSec, d.WriteBytesPerSec = profilesDisk.iops, profilesDisk.bandwidth, profilesDisk.bandwidth
			o.Device = &d
			o.Progress = func(s string) { fmt.Fprintf(os.Stderr, "%s profiles: %s\n", time.Now().Format(time.TimeOnly), s) }
			return profiles.Run(cmd.Context(), dir, o)
		})
	},
}

func init() {
	f := benchProfilesCmd.Flags()
	o := &profilesFlags
	f.IntVar(&o.Nodes, "nodes", 5, "in-process nodes")
	f.StringVar(&o.Tenants, "tenants", "a:hotspot,b:hotspot,c:hotspot,d:latest,e:hotspot,f:hotspot", "YCSB tenants, WORKLOAD[:DISTRIBUTION] comma-separated")
	f.StringVar(&o.Mixes, "mixes", profiles.MixesThesis, "the tenants' mixes: thesis (B all updates, D 95 % inserts, blind updates of whole records, as the thesis ran YCSB) or ycsb (the core mixes, updates read-and-swap)")
	f.Int64Var(&o.Records, "records", 20000, "records per tenant")
	f.IntVar(&o.SplitsPerTenant, "splits", 2, "ranges per tenant")
	f.IntVar(&o.Threads, "threads", 2, "client threads per tenant")
	f.Int64Var(&o.MemoryBytes, "memory-budget", 8<<20, "each node's engine memory budget, divided by its profile")
	f.IntVar(&profilesDisk.iops, "disk-iops", profiles.Disk.IOPS, "each node's emulated disk: operations per second")
	f.Int64Var(&profilesDisk.bandwidth, "disk-bandwidth", profiles.Disk.ReadBytesPerSec, "each node's emulated disk: bytes per second each way")
	f.StringSliceVar(&o.Homogeneous, "homogeneous", []string{"readwrite", "read", "write", "scan"}, "the profiles of the homogeneous arms")
	f.BoolVar(&o.NoNodeProfiles, "no-node-profiles", false, "leave out node_profiles' arms (a probe of the homogeneous ones)")
	f.DurationVar(&o.Settle, "settle", 10*time.Second, "pause after a reconfiguration before an arm's window")
	f.DurationVar(&o.Measure, "measure", 30*time.Second, "each arm's measured window")
	f.DurationVar(&o.Converge, "converge", 4*time.Minute, "the most node_profiles gets to reconfigure")
	f.DurationVar(&o.Warmup, "warmup", time.Minute, "the tenants' run before the first arm")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random leaders")
	benchCmd.AddCommand(benchProfilesCmd)
}
