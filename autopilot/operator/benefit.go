package operator

import (
	"fmt"
	"math"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/plan/profileplan"
)

// Metric names a quantity of the cluster model that an operator is meant to change. Each is computed by
// Measure from a Cluster, so the same definition gives the value a policy saw, the value it predicts and
// the value measured after the operator finished.
type Metric string

// The metrics. "Gap" metrics are the From node's value minus the To node's.
const (
	MetricReplicaGap    Metric = "replicas.gap"      // replicas(From) − replicas(To)
	MetricLeaderGap     Metric = "leaders.gap"       // leaders(From) − leaders(To)
	MetricBytesGap      Metric = "bytes.gap"         // bytes(From) − bytes(To)
	MetricQPSGap        Metric = "qps.gap"           // served QPS(From) − served QPS(To)
	MetricLiveVoters    Metric = "range.live-voters" // voters of Range on live nodes
	MetricRangeReplicas Metric = "range.replicas"    // replicas (voters and learners) of Range
	MetricNodeLeaders   Metric = "node.leaders"      // leaderships on From
	MetricNodeReplicas  Metric = "node.replicas"     // replicas on From
	MetricSpanMaxQPS    Metric = "span.max-qps"      // highest QPS of a range in [Start, End)
	MetricSpanRanges    Metric = "span.ranges"       // number of ranges in [Start, End)
	MetricSpanMaxStream Metric = "span.max-events"   // highest stream events/s of a range in [Start, End)
	// MetricProfileMatched is the share of the served load (leaders' QPS) whose range's class, from
	// its mix now, is the engine profile of its leader's node (node profiles).
	MetricProfileMatched Metric = "profile.matched"
	// MetricUsageGap is the measured usage (CPU share plus disk busy, model.Node.MeasuredUsage) of
	// From minus To's: what packing by predicted usage (usage_balance) is meant to narrow.
	MetricUsageGap Metric = "usage.gap"
	// MetricVoterWrites is the writes per second of the ranges with a voter on From: under Raft each
	// voter syncs and compacts them, whichever node leads (node profiles keep them off read nodes).
	MetricVoterWrites Metric = "node.voter-writes"
)

// Benefit is a prediction: Metric, scoped by the fields it uses, is Before now and should change by
// Delta once the operator is done.
type Benefit struct {
	Metric Metric  `json:"metric"`
	Range  uint64  `json:"range,omitempty"`
	From   uint64  `json:"from,omitempty"`
	To     uint64  `json:"to,omitempty"`
	Span   string  `json:"span,omitempty"` // [Start, End) for people; the keys themselves are not serialized
	Before float64 `json:"before"`
	Delta  float64 `json:"delta"`
	// Detail says the same in words, e.g. "left ≈ 1490 ops/s, right ≈ 1510 ops/s".
	Detail string `json:"detail,omitempty"`

	Start []byte `json:"-"`
	End   []byte `json:"-"`
	// Key is the split key of a split (its halves are measured separately).
	Key []byte `json:"-"`
}

// Expected is the value the metric should have once the operator is done.
func (b Benefit) Expected() float64 { return b.Before + b.Delta }

// String is "metric before→expected (detail)".
func (b Benefit) String() string {
	s := fmt.Sprintf("%s %s→%s", b.Metric, formatValue(b.Metric, b.Before), formatValue(b.Metric, b.Expected()))
	if b.Detail != "" {
		s += " (" + b.Detail + ")"
	}
	return s
}

func formatValue(m Metric, v float64) string {
	if m == MetricBytesGap {
		if v < 0 {
			return "-" + model.FormatBytes(uint64(-v))
		}
		return model.FormatBytes(uint64(v))
	}
	if m == MetricProfileMatched || m == MetricUsageGap {
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	if v == math.Trunc(v) || m == MetricSpanMaxQPS || m == MetricSpanMaxStream || m == MetricQPSGap || m == MetricVoterWrites {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Imbalance is |a−b| / max(a, b): 0 for equal loads, 1 when one is idle. Two loads are "within 10 % of
// each other" when Imbalance ≤ 0.10.
func Imbalance(a, b float64) float64 {
	hi := math.Max(a, b)
	if hi <= 0 {
		return 0
	}
	return math.Abs(a-b) / hi
}

// Measure computes b's metric on c, with a few words of detail. ok is false when the metric's scope
// no longer exists on c (a node left, the range is gone).
func Measure(b Benefit, c *model.Cluster) (value float64, detail string, ok bool) {
	pair := func(f func(*model.Node) float64) (float64, string, bool) {
		from, to := c.Node(b.From), c.Node(b.To)
		if from == nil || to == nil {
			return 0, "", false
		}
		return f(from) - f(to), fmt.Sprintf("n%d %s, n%d %s", b.From, formatValue(b.Metric, f(from)),
			b.To, formatValue(b.Metric, f(to))), true
	}
	switch b.Metric {
	case MetricReplicaGap:
		return pair(func(n *model.Node) float64 { return float64(n.Replicas) })
	case MetricLeaderGap:
		return pair(func(n *model.Node) float64 { return float64(n.Leaders) })
	case MetricBytesGap:
		return pair(func(n *model.Node) float64 { return float64(n.Bytes) })
	case MetricQPSGap:
		return pair(func(n *model.Node) float64 { return n.QPS })
	case MetricUsageGap:
		return pair(func(n *model.Node) float64 { return n.MeasuredUsage() })
	case MetricLiveVoters, MetricRangeReplicas:
		r := c.Range(b.Range)
		if r == nil {
			return 0, "", false
		}
		if b.Metric == MetricRangeReplicas {
			return float64(len(r.Replicas)), "", true
		}
		live := 0
		for _, v := range r.Voters() {
			if n := c.Node(v); n != nil && n.Live {
				live++
			}
		}
		return float64(live), "", true
	case MetricNodeLeaders, MetricNodeReplicas:
		n := c.Node(b.From)
		if n == nil {
			return 0, "", false
		}
		if b.Metric == MetricNodeLeaders {
			return float64(n.Leaders), "", true
		}
		return float64(n.Replicas), "", true
	case MetricSpanMaxQPS:
		ranges := c.RangesIn(b.Start, b.End)
		if len(ranges) == 0 {
			return 0, "", false
		}
		hi := 0.0
		for _, r := range ranges {
			hi = math.Max(hi, r.QPS())
		}
		if b.Key == nil {
			return hi, "", true
		}
		left, right := spanQPS(c.RangesIn(b.Start, b.Key)), spanQPS(c.RangesIn(b.Key, b.End))
		return hi, fmt.Sprintf("left %.0f ops/s, right %.0f ops/s, %.1f%% apart", left, right,
			100*Imbalance(left, right)), true
	case MetricSpanRanges:
		return float64(len(c.RangesIn(b.Start, b.End))), "", true
	case MetricSpanMaxStream:
		hi, n := 0.0, 0
		for _, r := range c.RangesIn(b.Start, b.End) {
			hi, n = math.Max(hi, r.StreamQPS), n+1
		}
		return hi, fmt.Sprintf("%d ranges", n), n > 0
	case MetricVoterWrites:
		if c.Node(b.From) == nil {
			return 0, "", false
		}
		w := 0.0
		for _, r := range c.Ranges {
			if r.IsVoter(b.From) {
				w += r.WriteQPS
			}
		}
		return w, "", true
	case MetricProfileMatched:
		matched, total := ProfileMatched(c)
		if total <= 0 {
			return 0, "", false
		}
		return matched / total, fmt.Sprintf("%.0f of %.0f ops/s on a node of their class", matched, total), true
	}
	return 0, "", false
}

func spanQPS(ranges []*model.Range) float64 {
	var q float64
	for _, r := range ranges {
		q += r.QPS()
	}
	return q
}

// ProfileMatched is the load (QPS) of the user ranges led from a node whose engine profile is the
// range's class as its mix is now (profileplan.Classify), and the load of all led user ranges.
func ProfileMatched(c *model.Cluster) (matched, total float64) {
	for _, r := range c.Ranges {
		n := c.Node(r.Leader)
		if r.System || n == nil {
			continue
		}
		q := r.QPS() + r.ReplicaReadQPS
		total += q
		if string(profileplan.Classify(MixOf(r))) == n.Profile {
			matched += q
		}
	}
	return matched, total
}

// MixOf is r's request mix as profileplan classifies it: every read (the leader's and its
// replicas'), the writes, and the scans among the reads.
func MixOf(r *model.Range) profileplan.Mix {
	return profileplan.Mix{Reads: r.ReadQPS + r.ReplicaReadQPS, Writes: r.WriteQPS, Scans: r.ScanQPS}
}
