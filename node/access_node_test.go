package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// A node's heartbeat carries its leaders' access statistics — measured reads, a block-access
// histogram — its cache's size, and its predicted usage.
func TestHeartbeatCarriesAccess(t *testing.T) {
	nd := startBootstrapped(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	for i := 0; i < 500; i++ {
		for {
			resp, err := nd.Put(ctx, &pb.PutRequest{Key: key(i), Value: make([]byte, 200)})
			if err == nil && resp.Error == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("put: %v %v", err, resp.GetError())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := nd.Engine().CompactAll(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; ctx.Err() == nil; i++ {
		if _, err := nd.Get(ctx, &pb.GetRequest{Key: key(i % 500)}); err != nil {
			t.Fatal(err)
		}
		if i%500 != 0 {
			continue
		}
		st, _ := nd.dir.StatsOf(nd.NodeID())
		var measured uint64
		hist := false
		for _, rl := range st.GetRanges() {
			measured += rl.MeasuredReads
			hist = hist || rl.Leader && len(rl.HistRates) > 0 && len(rl.HistRates) == len(rl.HistBlocks)
		}
		if measured > 0 && hist && st.BlockCacheCapacity > 0 && st.BlockCacheCapacity <= 7<<20 && st.BlockBytes > 0 && st.PredictedUsage > 0 {
			return
		}
	}
	t.Fatal("no heartbeat with measured reads, a histogram, the cache's room beside its memtables and a predicted usage in 30 s")
}
