package test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/plan/mergeplan"
	"github.com/shoaldb/shoal/storage/stored"
	"github.com/shoaldb/shoal/test/testcluster"
)

// digest hashes key/value pairs given in key order.
type digest struct {
	h    [32]byte
	keys int
}

func (d *digest) add(k, v []byte) {
	s := sha256.New()
	s.Write(d.h[:])
	fmt.Fprintf(s, "%d:%s=%d:%s;", len(k), k, len(v), v)
	copy(d.h[:], s.Sum(nil))
	d.keys++
}

func clusterDigest(t *testing.T, ctx context.Context, cl *client.Client) digest {
	t.Helper()
	kvs, err := cl.Scan(ctx, nil, nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var d digest
	for _, kv := range kvs {
		d.add(kv.Key, kv.Value)
	}
	return d
}

func chainDigest(t *testing.T, dir string) digest {
	t.Helper()
	c, err := backup.OpenChain(dir)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := c.Verify(true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := mergeplan.Make(sets, mergeplan.BalanceTreeInput, mergeplan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d digest
	// A backup holds stored values (package stored); a client reads their data.
	if _, err := c.Merge(p, t.TempDir(), func(k, v []byte) error {
		sv, err := stored.Decode(v)
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		d.add(k, sv.Data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestIncrementalBackupChainRestores: a full backup and incrementals taken on a node of a three-node
// cluster under a stream of puts and deletes (its leaderships shed first) form a chain whose restore
// into a new cluster is byte-identical to the source; a missing link is refused with nothing written.
func TestIncrementalBackupChainRestores(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Autopilot:  autopilot.Config{Interval: 200 * time.Millisecond},
		Background: background.Config{Config: bgtask.Config{MaxPostpone: 10 * time.Second}},
	}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	testcluster.SwitchOff(t, ctx, cl, policy.NameMerge, policy.NameLoadSplit)
	for i := range 1000 {
		if err := cl.Put(ctx, fmt.Appendf(nil, "key%04d", i), fmt.Appendf(nil, "v0-%d-%0*d", i, i%64, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, at := range []string{"key0300", "key0700"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	// Puts and deletes of zipf-chosen keys while the backups run.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var writeErrs int
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		zipf := rand.NewZipf(rng, 1.1, 1, 1199)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Appendf(nil, "key%04d", zipf.Uint64())
			var err error
			if i%5 == 0 {
				_, err = cl.Delete(ctx, k)
			} else {
				err = cl.Put(ctx, k, fmt.Appendf(nil, "v-%d", i))
			}
			if err != nil {
				// A write that fails while leaderships move is retried by the next one; the comparison
				// below is of the state once writes have stopped.
				writeErrs++
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// Back up the node that leads most ranges: its leaderships are shed before each backup.
	ranges, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	led := map[uint64]int{}
	target := c.Nodes[0].Node.NodeID()
	for _, r := range ranges {
		if led[r.LeaderNodeId]++; led[r.LeaderNodeId] > led[target] {
			target = r.LeaderNodeId
		}
	}
	t.Logf("backing up node %d, leader of %d of %d ranges", target, led[target], len(ranges))
	root := t.TempDir()
	dirs := []string{}
	for i := range 4 {
		if i == 3 {
			close(stop)
			wg.Wait()
			t.Logf("%d writes failed under the backups", writeErrs)
			time.Sleep(time.Second) // let a write that timed out on the client apply before the last backup
		}
		time.Sleep(500 * time.Millisecond) // writes between the backups
		dir := filepath.Join(root, fmt.Sprintf("b%d", i))
		parent := ""
		if i > 0 {
			parent = dirs[i-1]
		}
		res, err := cl.BackupIncremental(ctx, target, dir, parent, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := backup.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("backup %d: %d keys put, %d deleted, %d bytes, %s (%s) %s", i, m.TotalKeys, m.TotalDeletes, m.TotalBytes,
			res.Duration, res.Outcome, m.Method)
		if i > 0 && m.Method != "journal" {
			t.Fatalf("backup %d against the node's newest backup did not read the journal: %s (%s)", i, m.Method, m.Fallback)
		}
		if strings.Contains(res.Outcome, "ran anyway") {
			t.Fatalf("backup %d ran without shedding its node's leaderships: %s", i, res.Outcome)
		}
		if i > 0 && (!m.Incremental() || m.TotalBytes >= firstBytes(t, dirs[0])) {
			t.Fatalf("backup %d: incremental %v, %d bytes against the full backup's %d", i, m.Incremental(), m.TotalBytes, firstBytes(t, dirs[0]))
		}
		dirs = append(dirs, dir)
	}

	src := clusterDigest(t, ctx, cl)
	if got := chainDigest(t, dirs[3]); got != src {
		t.Fatalf("the chain holds %d keys (digest %x), the cluster %d (%x)", got.keys, got.h[:6], src.keys, src.h[:6])
	}
	// Against an older backup the journal no longer reaches back (it keeps what the newest needs):
	// the incremental diffs every key, says so, and holds the same state.
	older := filepath.Join(root, "from-b1")
	if _, err := cl.BackupIncremental(ctx, target, older, dirs[1], 0); err != nil {
		t.Fatal(err)
	}
	if m, err := backup.ReadManifest(older); err != nil || m.Method != "diff" || !strings.Contains(m.Fallback, "trimmed") {
		t.Fatalf("an incremental against an older backup: %+v, %v", m, err)
	}
	if got := chainDigest(t, older); got != src {
		t.Fatalf("the chain b0, b1, from-b1 holds %d keys (%x), the cluster %d (%x)", got.keys, got.h[:6], src.keys, src.h[:6])
	}

	// A missing parent is refused before anything is written.
	if _, err := cl.BackupIncremental(ctx, target, filepath.Join(root, "orphan"), filepath.Join(root, "nope"), 0); err == nil {
		t.Fatal("an incremental against a missing parent was accepted")
	} else if _, serr := os.Stat(filepath.Join(root, "orphan")); !os.IsNotExist(serr) {
		t.Fatalf("a refused incremental left %s behind", filepath.Join(root, "orphan"))
	}

	fresh := testcluster.StartSafe(t, testcluster.Options{Nodes: 1, Node: node.Config{Autopilot: autopilot.Config{
		Policies: policy.Config{Replicate: policy.ReplicateConfig{Factor: 1}}}}})
	fcl := fresh.Client()
	moved := dirs[1] + ".moved"
	if err := os.Rename(dirs[1], moved); err != nil {
		t.Fatal(err)
	}
	_, err = fcl.RestoreChain(ctx, dirs[3], client.ChainRestoreOptions{Strategy: mergeplan.SmallestInput})
	if !errors.Is(err, backup.ErrBrokenChain) {
		t.Fatalf("a chain with a missing link: %v", err)
	}
	t.Log(err)
	if d := clusterDigest(t, ctx, fcl); d.keys != 0 {
		t.Fatalf("a refused restore wrote %d keys", d.keys)
	}
	if err := os.Rename(moved, dirs[1]); err != nil {
		t.Fatal(err)
	}

	res, err := fcl.RestoreChain(ctx, dirs[3], client.ChainRestoreOptions{Strategy: mergeplan.SmallestInput, Fanin: 2,
		RestoreOptions: client.RestoreOptions{Verify: true, Batch: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if got := clusterDigest(t, ctx, fcl); got != src || !res.Verified || res.Links != 4 {
		t.Fatalf("restored %d keys (digest %x, %+v), the source has %d (%x)", got.keys, got.h[:6], res.RestoreResult, src.keys, src.h[:6])
	}

	// The roll-up of the chain is a full backup of the same state.
	ch, err := backup.OpenChain(dirs[3])
	if err != nil {
		t.Fatal(err)
	}
	sets, err := ch.Verify(true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := mergeplan.Make(sets, mergeplan.SmallestInput, mergeplan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Compact(ch, p, filepath.Join(root, "full")); err != nil {
		t.Fatal(err)
	}
	if got := chainDigest(t, filepath.Join(root, "full")); got != src {
		t.Fatalf("the roll-up holds %d keys (%x), the source %d (%x)", got.keys, got.h[:6], src.keys, src.h[:6])
	}
}

func firstBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	m, err := backup.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m.TotalBytes
}
