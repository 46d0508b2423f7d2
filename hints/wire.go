package hints

import (
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Conversions between this package's types and pb/hints.proto.

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

// rangeHintsToProto converts r, measuring its age at now on this node's clock.
func rangeHintsToProto(r RangeHints, now time.Time) *pb.RangeHints {
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
		b.Ranges[i] = rangeHintsToProto(r, now)
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

// CriteriaToProto converts warm criteria.
func CriteriaToProto(c WarmCriteria) *pb.HintWarmCriteria {
	return &pb.HintWarmCriteria{MaxApplyLagMillis: durMillis(c.MaxApplyLag), MinHitRatio: c.MinHitRatio,
		MinReplays: uint32(max(c.MinReplays, 0)), MaxIdleMillis: durMillis(c.MaxIdle)}
}

// CriteriaFromProto converts warm criteria (nil: the defaults).
func CriteriaFromProto(p *pb.HintWarmCriteria) WarmCriteria {
	if p == nil {
		return DefaultWarmCriteria()
	}
	return WarmCriteria{MaxApplyLag: time.Duration(p.GetMaxApplyLagMillis()) * time.Millisecond,
		MinHitRatio: p.GetMinHitRatio(), MinReplays: int(p.GetMinReplays()),
		MaxIdle: time.Duration(p.GetMaxIdleMillis()) * time.Millisecond}
}

// WarmthToProto converts a warmth report.
func WarmthToProto(w Warmth) *pb.HintWarmth {
	return &pb.HintWarmth{RangeId: w.RangeID, Known: w.Known, ApplyLagMicros: uint64(max(w.ApplyLag, 0).Microseconds()),
		IdleMicros: uint64(max(w.Idle, 0).Microseconds()), HitRatio: w.HitRatio, Replays: w.Replays,
		HintsApplied: w.HintsApplied}
}

// WarmthFromProto converts a warmth report.
func WarmthFromProto(p *pb.HintWarmth) Warmth {
	if p == nil {
		return Warmth{}
	}
	return Warmth{RangeID: p.GetRangeId(), Known: p.GetKnown(),
		ApplyLag: time.Duration(p.GetApplyLagMicros()) * time.Microsecond,
		Idle:     time.Duration(p.GetIdleMicros()) * time.Microsecond, HitRatio: p.GetHitRatio(),
		Replays: p.GetReplays(), HintsApplied: p.GetHintsApplied()}
}

func durMillis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 0:
		return 0
	case ms > int64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(ms)
}
