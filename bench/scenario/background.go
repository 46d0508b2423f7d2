package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/bench/benchutil"
)

// Scenarios of issue 8 (docs/design/shed-leadership.md): a heavy background task on the node that
// leads most ranges, with the shed_leadership policy on and off (chapter 3 of the Papaioannou thesis,
// Figures 3.3–3.5).

func init() {
	pin := map[string]bool{"rebalance": false, "merge": false, "load_split": false}
	base := Scenario{
		Nodes: 3, Records: 160000, Duration: 90 * time.Second, Threads: 8, ValueBytes: 256, CacheBytes: 16 << 20,
		Policy: "shed_leadership", Splits: 6, Pin: pin, Warmup: 10 * time.Second,
	}
	compaction := func(name string, reads float64, desc string) Scenario {
		s := base
		s.Name, s.ReadFraction, s.Description = name, reads, desc
		s.Events = []Event{{At: 30 * time.Second, What: "full compaction", Do: CompactBusiestNode(), Task: true}}
		return s
	}
	Register(compaction("compaction", 0.9,
		"3 nodes, 160k records (~3x the 16 MiB block cache), 6 ranges; at t=30s a full compaction on the node leading most ranges; YCSB 90/10 zipfian; policy shed_leadership"))
	c50 := compaction("compaction-50", 0.5, "as compaction, with YCSB 50/50 (150 s: writes make the compaction longer)")
	c50.Duration = 150 * time.Second
	Register(c50)
	b := base
	b.Name, b.ReadFraction = "backup", 0.9
	b.Description = "3 nodes, 160k records, 6 ranges; at t=30s a backup of the node leading most ranges; YCSB 90/10 zipfian; policy shed_leadership"
	b.Events = []Event{{At: 30 * time.Second, What: "backup", Do: BackupBusiestNode(), Task: true}}
	Register(b)
}

// busiestNode is the node leading most user ranges (lowest id on a tie).
func busiestNode(ctx context.Context, env *Env) (uint64, int, error) {
	rs, err := benchutil.UserRanges(ctx, env.Client)
	if err != nil {
		return 0, 0, err
	}
	count := map[uint64]int{}
	for _, r := range rs {
		if r.LeaderNodeId != 0 {
			count[r.LeaderNodeId]++
		}
	}
	var best uint64
	for id, n := range count {
		if best == 0 || n > count[best] || (n == count[best] && id < best) {
			best = id
		}
	}
	if best == 0 {
		return 0, 0, fmt.Errorf("no user range has a leader")
	}
	return best, count[best], nil
}

// CompactBusiestNode runs a full manual compaction on the node leading most ranges and returns when
// it is done.
func CompactBusiestNode() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		node, led, err := busiestNode(ctx, env)
		if err != nil {
			return "", err
		}
		res, err := env.Client.Compact(ctx, node)
		if err != nil {
			return fmt.Sprintf("n%d", node), err
		}
		return fmt.Sprintf("n%d (led %d ranges) in %.1fs: %s", node, led, res.Duration.Seconds(), res.Outcome), nil
	}
}

// BackupBusiestNode backs up the node leading most ranges into the run's directory and returns when
// the backup is complete.
func BackupBusiestNode() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		node, led, err := busiestNode(ctx, env)
		if err != nil {
			return "", err
		}
		dir := filepath.Join(env.c.dir, fmt.Sprintf("backup-n%d-%d", node, time.Now().UnixNano()))
		res, err := env.Client.Backup(ctx, node, dir, 0)
		if err != nil {
			return fmt.Sprintf("n%d", node), err
		}
		var m backup.Manifest
		_ = json.Unmarshal([]byte(res.Manifest), &m)
		return fmt.Sprintf("n%d (led %d ranges) in %.1fs (writing %.1fs, %d keys, %.1f MiB): %s", node, led, res.Duration.Seconds(),
			float64(m.DurationMS)/1000, m.TotalKeys, float64(m.TotalBytes)/(1<<20), res.Outcome), nil
	}
}
