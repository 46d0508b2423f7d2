package hint

import (
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Conversions between this package's types and the messages of pb/hints.proto.

// HintToProto converts one hint.
func HintToProto(h Hint) *pb.ReadHint {
	return &pb.ReadHint{Key: h.Key, End: h.End, Limit: h.Limit, Scan: h.Scan, Reverse: h.Reverse, Count: h.Count}
}

// HintFromProto converts one hint; the result aliases p's byte slices. A count of 0 reads as 1.
func HintFromProto(p *pb.ReadHint) Hint {
	h := Hint{Descriptor: Descriptor{Key: p.GetKey(), Limit: p.GetLimit(), Scan: p.GetScan(), Reverse: p.GetReverse()},
		Count: p.GetCount()}
	if h.Scan {
		h.End = p.GetEnd()
	}
	if h.Count == 0 {
		h.Count = 1
	}
	return h
}

// HintsToProto converts a list of hints (the messages share one allocation).
func HintsToProto(hs []Hint) []*pb.ReadHint {
	out := make([]*pb.ReadHint, len(hs))
	slab := make([]pb.ReadHint, len(hs))
	for i, h := range hs {
		p := &slab[i]
		p.Key, p.End, p.Limit, p.Scan, p.Reverse, p.Count = h.Key, h.End, h.Limit, h.Scan, h.Reverse, h.Count
		out[i] = p
	}
	return out
}

// HintsFromProto converts a list of hints (aliasing their bytes).
func HintsFromProto(ps []*pb.ReadHint) []Hint {
	out := make([]Hint, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, HintFromProto(p))
		}
	}
	return out
}

// RangeToProto converts r, measuring its age at now on this node's clock.
func RangeToProto(r RangeHints, now time.Time) *pb.RangeHints {
	return &pb.RangeHints{RangeId: r.RangeID, AgeMicros: rangeAgeMicros(r, now), Hints: HintsToProto(r.Hints)}
}

// rangeAgeMicros is r's age at now on this node's clock, in whole microseconds (0 if not stamped).
func rangeAgeMicros(r RangeHints, now time.Time) uint64 {
	if r.CapturedAt.IsZero() {
		return 0
	}
	return uint64(max(now.Sub(r.CapturedAt), 0).Microseconds())
}

// BatchToProto builds the wire batch of ranges as a node would ship it at now.
func BatchToProto(from uint64, clusterID string, ranges []RangeHints, now time.Time) *pb.HintBatch {
	b := &pb.HintBatch{FromNode: from, ClusterId: clusterID, Ranges: make([]*pb.RangeHints, len(ranges))}
	for i, r := range ranges {
		b.Ranges[i] = RangeToProto(r, now)
	}
	return b
}

// BatchFromProto converts a received batch at now (the receiver's clock): each range's CapturedAt
// is now minus the age the sender measured and the time the batch waited in the sender's queue, so
// the apply lag never compares two nodes' clocks (network transit is not counted). The hints alias
// b's bytes.
func BatchFromProto(b *pb.HintBatch, now time.Time) []RangeHints {
	out := make([]RangeHints, 0, len(b.GetRanges()))
	queued := time.Duration(b.GetQueuedMicros()) * time.Microsecond
	for _, r := range b.GetRanges() {
		if r == nil {
			continue
		}
		age := time.Duration(r.GetAgeMicros())*time.Microsecond + queued
		out = append(out, RangeHints{RangeID: r.GetRangeId(), CapturedAt: now.Add(-age), Hints: HintsFromProto(r.GetHints())})
	}
	return out
}
