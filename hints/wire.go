package hints

import (
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Conversions between the warmth types and pb/hints.proto (the hints themselves: package hint).

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
