package scenario

import (
	"testing"

	"github.com/shoaldb/shoal/storage"
)

// TestCachesHoldBlocks checks that every scenario's nodes leave at least half their block cache for
// blocks once Pebble has charged their two memtables to it: with memtables too large for the cache,
// every read would miss and the scenario would measure the disk instead of its cache.
func TestCachesHoldBlocks(t *testing.T) {
	for _, sc := range List() {
		cache := sc.CacheBytes
		if cache <= 0 {
			cache = 8 << 20 // resolve's default
		}
		shape := shapeFor(memTableFor(cache), sc.RandomValues, true)
		for i := range max(sc.Nodes, 4) { // the join scenarios' fourth node too
			o := storage.Options{CacheBytes: cache, MemTableBytes: shape.memTableOf(i)}
			if room := o.BlockRoomBytes(); room < cache/2 {
				t.Errorf("%s: node %d's %d-MiB cache beside %.1f-MiB memtables leaves %.1f MiB for blocks, under half",
					sc.Name, i+1, cache>>20, float64(shape.memTableOf(i))/(1<<20), float64(room)/(1<<20))
			}
		}
	}
}
