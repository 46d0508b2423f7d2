package model

import (
	"bytes"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// DefaultKeySampleSize is how many requests a KeySampler keeps per window. At one window per heartbeat
// (one second) a range at the load-split threshold is sampled at about 1 in 2.5 requests, and the
// load_split search has the ~16 k samples it wants after about 16 s.
const DefaultKeySampleSize = 1024

// KeyCount is one sampled key and how many of the window's sampled requests were for it.
type KeyCount struct {
	Key   []byte
	Count uint32
}

// KeySample is a uniform sample of the requests a range served in one window, grouped by key.
//
// Every request of the window had the same chance to be sampled, so the keys (repeated Count times) are
// an unbiased sample of the window's request distribution, and each sampled request stands for
// Requests/Size() requests.
type KeySample struct {
	// At is the end of the window. Consumers use it to tell a new window from one already seen.
	At time.Time
	// Requests is the number of requests the range served in the window (sampled or not).
	Requests uint64
	// Keys sorted by key, each at most once.
	Keys []KeyCount
}

// Size is the number of sampled requests (the sum of the counts).
func (s *KeySample) Size() uint64 {
	if s == nil {
		return 0
	}
	var n uint64
	for _, k := range s.Keys {
		n += uint64(k.Count)
	}
	return n
}

// FractionBelow is the share of the sampled requests for keys < key (0 for an empty sample).
func (s *KeySample) FractionBelow(key []byte) float64 {
	size := s.Size()
	if size == 0 {
		return 0
	}
	var below uint64
	for _, k := range s.Keys {
		if bytes.Compare(k.Key, key) >= 0 {
			break
		}
		below += uint64(k.Count)
	}
	return float64(below) / float64(size)
}

// NewKeySample builds a sample from raw sampled keys (any order, repeats allowed).
func NewKeySample(at time.Time, requests uint64, keys [][]byte) *KeySample {
	s := &KeySample{At: at, Requests: requests}
	sorted := make([][]byte, len(keys))
	copy(sorted, keys)
	sort.Slice(sorted, func(i, j int) bool { return bytes.Compare(sorted[i], sorted[j]) < 0 })
	for _, k := range sorted {
		if n := len(s.Keys); n > 0 && bytes.Equal(s.Keys[n-1].Key, k) {
			s.Keys[n-1].Count++
			continue
		}
		s.Keys = append(s.Keys, KeyCount{Key: append([]byte(nil), k...), Count: 1})
	}
	return s
}

// KeySampler keeps a uniform reservoir sample (Vitter's algorithm R) of the keys a range serves during a
// window. The range's leader calls Record on every request and Take once per heartbeat. Record costs a
// mutex, a random number and, for the few requests that enter the reservoir, a key copy. Safe for
// concurrent use.
type KeySampler struct {
	mu       sync.Mutex
	size     int
	keys     [][]byte
	requests uint64
	rng      *rand.Rand
}

// NewKeySampler returns a sampler keeping size keys per window (DefaultKeySampleSize if size <= 0).
// seed makes the sample reproducible (tests); nodes may pass any value.
func NewKeySampler(size int, seed uint64) *KeySampler {
	if size <= 0 {
		size = DefaultKeySampleSize
	}
	return &KeySampler{size: size, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Record notes one request for key. The sampler copies the key if it keeps it.
func (s *KeySampler) Record(key []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if len(s.keys) < s.size {
		s.keys = append(s.keys, append([]byte(nil), key...))
		return
	}
	if j := s.rng.Uint64N(s.requests); j < uint64(s.size) {
		s.keys[j] = append(s.keys[j][:0], key...)
	}
}

// Take returns the window's sample, ending the window at at, and starts a new window.
func (s *KeySampler) Take(at time.Time) *KeySample {
	s.mu.Lock()
	keys, requests := s.keys, s.requests
	s.keys, s.requests = make([][]byte, 0, s.size), 0
	s.mu.Unlock()
	return NewKeySample(at, requests, keys)
}
