package test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/test/testcluster"
)

// A range that grows past RangeMaxBytes is split by the size queue, and nothing is lost.
func TestRangeSplitsWhenItGrowsPastMaxBytes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 1, Node: node.Config{KV: kv.Config{RangeMaxBytes: 256 << 10}}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The threshold applies to on-disk (compressed) bytes: use incompressible values.
	rng := rand.New(rand.NewSource(1))
	const n = 1000 // ~1 MiB: about four times the limit
	for i := 0; i < n; i++ {
		val := make([]byte, 1024)
		rng.Read(val)
		if err := cl.Put(ctx, []byte(fmt.Sprintf("grow/%05d", i)), val); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Size estimates come from on-disk tables: flush the memtable so the queue sees the bytes.
	if err := c.Nodes[0].Eng.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 30*time.Second, "size-based splits", func() bool {
		rs, err := cl.Ranges(ctx)
		return err == nil && len(rs) >= 3 // meta + at least two user ranges
	})
	kvs, err := cl.Scan(ctx, []byte("grow/"), []byte("grow0"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != n {
		t.Fatalf("scan after splits returned %d keys, want %d", len(kvs), n)
	}
}
