package storage

import (
	"fmt"
	"slices"
	"strings"
)

// Engine profiles: one engine configuration cannot suit every workload. A read-heavy node wants a
// large block cache, a write-heavy one large memtables, a scanning one large blocks (Cruz's MeT,
// thesis Table 3.1: the shares of the node's memory given to the block cache and to the memtables,
// and the data block size). A profile sizes the cache and the memtables from the engine's memory
// budget (Options.MemoryBytes); a size set explicitly wins over the profile's.
var profiles = map[string]struct {
	cacheShare, memTableShare float64
	blockBytes                int
}{
	"read":      {0.55, 0.10, 32 << 10},
	"write":     {0.10, 0.55, 64 << 10},
	"readwrite": {0.45, 0.20, 32 << 10},
	"scan":      {0.55, 0.10, 128 << 10},
}

// ProfileDefault is the engine without a profile: the cache and memtable defaults, Pebble's 4 KiB
// blocks.
const ProfileDefault = "default"

// DefaultMemoryBytes is the memory budget a profile divides when Options.MemoryBytes is 0.
const DefaultMemoryBytes = 256 << 20

// Profiles lists the profile names, ProfileDefault first.
func Profiles() []string {
	names := []string{ProfileDefault}
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names[1:])
	return names
}

// withProfile applies o.Profile to the sizes left at zero. The memtables get their share of the
// budget as two memtables' worth: Pebble keeps one filling and one flushing or kept for reuse. It
// charges both to the block cache (Stats.BlockCacheCapacity), so the cache the profile sizes holds
// the memtables' two on top of its share for blocks; without them a write profile's memtables
// would take its whole cache.
func (o Options) withProfile() Options {
	p, ok := profiles[o.Profile]
	if !ok {
		return o
	}
	budget := o.MemoryBytes
	if budget == 0 {
		budget = DefaultMemoryBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = uint64(p.memTableShare * float64(budget) / 2)
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = CacheBytesFor(int64(p.cacheShare*float64(budget)), o.MemTableBytes)
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = p.blockBytes
	}
	return o
}

func validateProfile(o Options) error {
	if _, ok := profiles[o.Profile]; !ok && o.Profile != "" && o.Profile != ProfileDefault {
		return fmt.Errorf("storage: unknown profile %q (one of %s)", o.Profile, strings.Join(Profiles(), ", "))
	}
	if o.MemoryBytes < 0 || o.BlockBytes < 0 {
		return fmt.Errorf("storage: memory budget %d and block size %d must not be negative", o.MemoryBytes, o.BlockBytes)
	}
	return nil
}
