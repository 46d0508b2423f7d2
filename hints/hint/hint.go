// Package hint is the data of read hints (package hints): the description of one read a range's
// leader served (Descriptor), its count in a batch (Hint), a range's hints from one window
// (RangeHints), their stable hashes, and their encodings on the wire (pb/hints.proto): the messages,
// and the direct encoding the shipper writes once per batch.
//
// It owns values and pure functions only: it must never read the engine, keep state, or send.
package hint

import (
	"bytes"
	"fmt"
	"time"
)

// Descriptor is the minimal description of one read, enough for a replica to repeat it: a point read
// of Key, or (Scan) a scan of [Key, End) of at most Limit rows, backwards from End when Reverse. Keys
// are the range's keys as the client sent them (not engine keys); an empty End is the end of the
// range; Limit 0 is the receiver's cap (ApplierConfig.MaxScanRows).
type Descriptor struct {
	Key     []byte
	End     []byte
	Limit   uint32
	Scan    bool
	Reverse bool
}

// Point describes a point read of key.
func Point(key []byte) Descriptor { return Descriptor{Key: key} }

// ScanOf describes a scan of [start, end) of at most limit rows (limit <= 0: no limit of its own).
func ScanOf(start, end []byte, limit int, reverse bool) Descriptor {
	return Descriptor{Key: start, End: end, Limit: ClampLimit(limit), Scan: true, Reverse: reverse}
}

// ClampLimit is a scan's row limit as a Descriptor holds it: 0 for none (limit <= 0), at most 2^31.
func ClampLimit(limit int) uint32 {
	switch {
	case limit <= 0:
		return 0
	case limit > 1<<31:
		return 1 << 31
	}
	return uint32(limit)
}

// Equal reports whether d and o describe the same read.
func (d Descriptor) Equal(o Descriptor) bool {
	return d.Scan == o.Scan && d.Reverse == o.Reverse && d.Limit == o.Limit &&
		bytes.Equal(d.Key, o.Key) && bytes.Equal(d.End, o.End)
}

// String is a short human-readable form.
func (d Descriptor) String() string {
	if !d.Scan {
		return fmt.Sprintf("get %q", d.Key)
	}
	dir := "scan"
	if d.Reverse {
		dir = "rscan"
	}
	return fmt.Sprintf("%s [%q, %q) limit %d", dir, d.Key, d.End, d.Limit)
}

// Compare orders descriptors by their identity (a total order consistent with Equal).
func (d Descriptor) Compare(o Descriptor) int { return bytes.Compare(d.identity(nil), o.identity(nil)) }

// identity appends a byte string that is equal for two descriptors exactly when they are Equal
// (the summarization key).
func (d Descriptor) identity(dst []byte) []byte {
	var flags byte
	if d.Scan {
		flags |= 1
	}
	if d.Reverse {
		flags |= 2
	}
	dst = append(dst, flags, byte(d.Limit>>24), byte(d.Limit>>16), byte(d.Limit>>8), byte(d.Limit))
	n := len(d.Key)
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	dst = append(dst, d.Key...)
	return append(dst, d.End...)
}

// Hash64 is the descriptor's stable 64-bit hash: FNV-1a over its identity bytes (computed in place:
// no allocation, the same value as hashing identity's output) with a finalizer. It is the same on
// every node and in every batch, so a selection by hash picks the same reads everywhere.
func (d Descriptor) Hash64() uint64 {
	var flags byte
	if d.Scan {
		flags |= 1
	}
	if d.Reverse {
		flags |= 2
	}
	return descHash(d.Key, d.End, d.Limit, flags)
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// descHash is Hash64 of the descriptor with these keys, limit and identity flags (1: scan, 2: reverse).
func descHash(key, end []byte, limit uint32, flags byte) uint64 {
	h := uint64(fnvOffset64)
	step := func(b byte) { h ^= uint64(b); h *= fnvPrime64 }
	step(flags)
	step(byte(limit >> 24))
	step(byte(limit >> 16))
	step(byte(limit >> 8))
	step(byte(limit))
	n := len(key)
	step(byte(n >> 24))
	step(byte(n >> 16))
	step(byte(n >> 8))
	step(byte(n))
	for _, b := range key {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	for _, b := range end {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	// FNV alone spreads keys that differ in their last bytes poorly over the high bits; a
	// finalizer (MurmurHash3's fmix64) makes the selected share match the fraction.
	x := h
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Size is the descriptor's approximate memory and wire footprint in bytes.
func (d Descriptor) Size() int { return len(d.Key) + len(d.End) + 8 }

// Clone returns a copy of d that shares no memory with it.
func (d Descriptor) Clone() Descriptor {
	d.Key = append([]byte(nil), d.Key...)
	if d.End != nil {
		d.End = append([]byte(nil), d.End...)
	}
	return d
}

// Hint is a descriptor with the number of times the read was served in one batch's window
// (duplicates are summarized into one hint). In a hot-key summary, Count is the decayed hotness.
type Hint struct {
	Descriptor
	Count uint32
}

// RangeHints are the hints of one range from one flush.
type RangeHints struct {
	RangeID uint64
	// CapturedAt is when the oldest of these hints was recorded, on this node's clock (on a receiver:
	// the sender's age of the batch carried over to the local clock, so clocks are never compared).
	CapturedAt time.Time
	Hints      []Hint
	// Hashes, when it is as long as Hints, holds Hints[i].Hash64() at i: computed once by whoever
	// produced the hints (the capture buffer's drain, the applier) and reused by their consumers (the
	// hot-key summary). Whoever changes Hints in place after setting it must reset it; a Hashes of
	// another length is ignored.
	Hashes []uint64
}

// Reads is the number of reads the hints stand for (the sum of their counts).
func (r RangeHints) Reads() uint64 {
	var n uint64
	for _, h := range r.Hints {
		n += uint64(h.Count)
	}
	return n
}
