package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node/accessstats"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
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
		if measured > 0 && hist && st.BlockCacheCapacity > 0 && st.BlockCacheCapacity <= 7<<20 && st.BlockBytes > 0 && st.PredictedUsage > 0 &&
			st.IndexFilterBytes > 0 {
			checkIndexFilter(t, nd, st)
			return
		}
	}
	t.Fatal("no heartbeat with measured reads, a histogram, the cache's room beside its memtables, index and filter bytes and a predicted usage in 30 s")
}

// checkIndexFilter: st's index and filter bytes are those of the tables that hold the user data the
// node leads (all of it, on one node): the compacted store's tables do not change, so the heartbeat
// read their properties; and the room for data blocks the prediction used leaves them out.
func checkIndexFilter(t *testing.T, nd *Node, st *pb.NodeStats) {
	t.Helper()
	lo, hi := storage.DataSpan(false, nil, nil)
	tables, err := accessstats.ReadIndexFilter(nd.Engine(), lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, b := range tables {
		want += b
	}
	if st.IndexFilterBytes != min(want, st.BlockCacheCapacity) {
		t.Fatalf("heartbeat's index and filter bytes %d, the user data's tables have %d (room %d)", st.IndexFilterBytes, want, st.BlockCacheCapacity)
	}
	room := DataBlockRoom(st)
	if whole := float64(st.BlockCacheCapacity) / float64(st.BlockBytes); room <= 0 || room >= whole {
		t.Fatalf("room for data blocks %.1f of a cache of %.1f blocks with %d bytes of index and filter", room, whole, st.IndexFilterBytes)
	}
	t.Logf("index and filter blocks %d bytes of a room of %d", st.IndexFilterBytes, st.BlockCacheCapacity)
}
