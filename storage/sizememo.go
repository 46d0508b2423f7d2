package storage

import (
	"sync"
	"time"
)

// sizeMemoMaxAge bounds how long a remembered estimate is used even if no flush, compaction or
// ingest was seen since (a change of the tables the event listener does not report).
const sizeMemoMaxAge = 10 * time.Second

// sizeMemoMaxEntries bounds the spans remembered at once; past it the memo starts afresh.
const sizeMemoMaxEntries = 4096

// sizeMemo remembers ApproximateBytes' estimates while the engine's tables stay the same. The
// estimate reads the tables' index blocks, which on a node whose cache is small are read from disk:
// heartbeats, access statistics and the size-split check ask for every replica's size each
// second, and a node leading many ranges spent a large share of its disk's operations on them.
// The estimate counts the tables only, so it can change only when a flush, a compaction or an
// ingest changes them (lsmChanges).
type sizeMemo struct {
	mu      sync.Mutex
	version int64 // lsmChanges when m was started
	since   time.Time
	m       map[string]uint64
}

// get returns the estimate of [lo, hi) remembered at version, if any.
func (s *sizeMemo) get(version int64, lo, hi []byte, now time.Time) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.version != version || now.Sub(s.since) > sizeMemoMaxAge {
		return 0, false
	}
	n, ok := s.m[spanKey(lo, hi)]
	return n, ok
}

// put remembers the estimate n of [lo, hi), computed at version.
func (s *sizeMemo) put(version int64, lo, hi []byte, n uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.version != version || now.Sub(s.since) > sizeMemoMaxAge || len(s.m) >= sizeMemoMaxEntries {
		s.m, s.version, s.since = map[string]uint64{}, version, now
	}
	s.m[spanKey(lo, hi)] = n
}

func spanKey(lo, hi []byte) string {
	k := make([]byte, 0, 4+len(lo)+len(hi))
	k = append(k, byte(len(lo)>>24), byte(len(lo)>>16), byte(len(lo)>>8), byte(len(lo)))
	return string(append(append(k, lo...), hi...))
}
