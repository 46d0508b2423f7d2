package node

import (
	"math"
	"time"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/node/autopilothost"
	"github.com/shoaldb/shoal/node/jobs"
	"github.com/shoaldb/shoal/node/streamhost"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// Metrics is a point-in-time reading of a node's counters and gauges, for the metrics endpoint.
type Metrics struct {
	Loop      replica.LoopStats
	Engine    storage.Stats
	Transport transport.Stats
	Replicas  int
	Leaders   int
	Active    int // replicas ticking (not quiesced)
	// CacheHitRatio is the block cache's hit ratio over about the last 10 s (from this node's
	// heartbeat readings of the engine's counters), NaN when the cache saw no lookups.
	CacheHitRatio float64
	// DiskUtilization is how busy the node's disk was over its last sample (storage.Engine.DiskUtilization).
	DiskUtilization float64
	// Operators counts the autopilot decisions that finished while this node ran the autopilot, by
	// policy, operator kind and outcome (cumulative over the node's life).
	Operators map[autopilothost.OperatorKey]uint64
	// AdmissionRequests and AdmissionWrites read the admission gates (Node.Admission).
	AdmissionRequests, AdmissionWrites admission.Stats
	// Jobs counts the scan-job runs this node carried out (node/jobs).
	Jobs jobs.Stats
	// Streams counts stream events and their state accesses, served here or at another node.
	Streams streamhost.Stats
	// PredictedUsage and MeasuredUsage are the node's usage (CPU share plus disk busy) as the usage
	// model predicted it at the last heartbeat and as measured; AsksForNode that the autopilot here
	// asks for one more node (usage_balance).
	PredictedUsage, MeasuredUsage float64
	AsksForNode                   bool
}

// cacheRatioWindow is the window of Metrics.CacheHitRatio.
const cacheRatioWindow = 10 * time.Second

// Metrics reads the node's counters; zero before Start.
func (n *Node) Metrics() Metrics {
	st := n.Store()
	if n.notReady() != nil || st == nil {
		return Metrics{}
	}
	m := Metrics{Loop: st.LoopStats(), Engine: n.eng.Stats(), Transport: n.transport.Stats(), Active: st.ActiveReplicas(),
		Operators: n.ap.OperatorCounts(), Jobs: n.scanJobs.Stats(), Streams: n.streams.Stats()}
	m.AdmissionRequests, m.AdmissionWrites = n.Admission()
	m.DiskUtilization = n.eng.DiskUtilization()
	m.CacheHitRatio = math.NaN()
	if r, ok := n.dir.CacheHitRatio(n.NodeID(), cacheRatioWindow); ok {
		m.CacheHitRatio = r
	}
	if hb, _ := n.dir.StatsOf(n.NodeID()); hb != nil {
		m.PredictedUsage, m.MeasuredUsage = hb.PredictedUsage, hb.DiskBusy
		if hb.CpuCores > 0 {
			m.MeasuredUsage += hb.CpuPercent / 100 / hb.CpuCores
		}
	}
	m.AsksForNode = n.ap.AsksForNode()
	for _, r := range st.Replicas() {
		m.Replicas++
		if r.IsLeader() {
			m.Leaders++
		}
	}
	return m
}
