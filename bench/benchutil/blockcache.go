package benchutil

import (
	"math"

	"github.com/shoaldb/shoal/storage"
)

// EngineStats is each node's engine counters, in node order (zero for a stopped node).
func EngineStats(c *Cluster) []storage.Stats {
	out := make([]storage.Stats, c.Len())
	for i, n := range c.Nodes() {
		if n != nil {
			out[i] = n.Eng.Stats()
		}
	}
	return out
}

// BlockCacheFigures is, per node, its block cache's room for blocks in the now sample as its engine
// measures it (MB, the cache less the memtables charged to it), and the share of the block lookups
// between the two samples that the cache served.
func BlockCacheFigures(before, now []storage.Stats) (roomMB, hitRatio []float64) {
	for i, st := range now {
		roomMB = append(roomMB, math.Round(float64(st.BlockCacheCapacity)/1e4)/100)
		hits, misses := st.BlockCacheHits-before[i].BlockCacheHits, st.BlockCacheMisses-before[i].BlockCacheMisses
		hitRatio = append(hitRatio, math.Round(1000*float64(hits)/float64(max(1, hits+misses)))/1000)
	}
	return roomMB, hitRatio
}
