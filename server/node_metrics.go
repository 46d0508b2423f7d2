package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/node"
)

// nodeCollector exposes a node's raft, storage and transport counters, read at scrape time so the
// hot paths only bump atomics.
type nodeCollector struct {
	read func() node.Metrics
	desc map[string]*prometheus.Desc
}

type metricDef struct {
	name, help string
	counter    bool
	value      func(node.Metrics) float64
}

var nodeMetricDefs = []metricDef{
	{"shoal_raft_loop_cycles_total", "Raft loop cycles that had work.", true, func(m node.Metrics) float64 { return float64(m.Loop.Cycles) }},
	{"shoal_raft_fsyncs_total", "Synced engine commits of the raft loop (one per cycle for all ranges: group commit).", true, func(m node.Metrics) float64 { return float64(m.Loop.Syncs) }},
	{"shoal_raft_entries_appended_total", "Raft log entries written.", true, func(m node.Metrics) float64 { return float64(m.Loop.EntriesWritten) }},
	{"shoal_raft_entries_committed_total", "Committed raft entries handed to the state machine.", true, func(m node.Metrics) float64 { return float64(m.Loop.EntriesApplied) }},
	{"shoal_raft_proposals_total", "Commands proposed by leaders on this node.", true, func(m node.Metrics) float64 { return float64(m.Loop.Proposals) }},
	{"shoal_reads_lease_total", "Linearizable reads served under the leader lease (no round trip).", true, func(m node.Metrics) float64 { return float64(m.Loop.LeaseReads) }},
	{"shoal_reads_read_index_total", "Linearizable reads that waited for a ReadIndex round (no valid lease).", true, func(m node.Metrics) float64 { return float64(m.Loop.ReadIndexReads) }},
	{"shoal_raft_messages_dropped_invalid_total", "Raft messages from peers dropped because they failed validation (a bug or a hostile peer; zero on a healthy cluster).", true, func(m node.Metrics) float64 { return float64(m.Loop.DroppedInvalid) }},
	{"shoal_raft_leader_changes_total", "Leader changes observed by replicas on this node.", true, func(m node.Metrics) float64 { return float64(m.Loop.LeaderChanges) }},
	{"shoal_raft_snapshots_applied_total", "Snapshots installed on this node.", true, func(m node.Metrics) float64 { return float64(m.Loop.SnapshotsApplied) }},
	{"shoal_raft_messages_sent_total", "Raft messages sent to other nodes.", true, func(m node.Metrics) float64 { return float64(m.Transport.MessagesSent) }},
	{"shoal_raft_messages_dropped_total", "Raft messages dropped (queue full, peer unreachable).", true, func(m node.Metrics) float64 { return float64(m.Transport.MessagesDropped) }},
	{"shoal_raft_snapshots_sent_total", "Snapshots sent and accepted.", true, func(m node.Metrics) float64 { return float64(m.Transport.SnapshotsSent) }},
	{"shoal_raft_snapshots_receiving", "Snapshot streams being received now.", false, func(m node.Metrics) float64 { return float64(m.Transport.SnapshotsReceiving) }},
	{"shoal_raft_snapshot_sent_bytes_total", "Snapshot bytes sent.", true, func(m node.Metrics) float64 { return float64(m.Transport.SnapshotBytesSent) }},
	{"shoal_storage_block_cache_hits_total", "Block cache hits.", true, func(m node.Metrics) float64 { return float64(m.Engine.BlockCacheHits) }},
	{"shoal_storage_block_cache_misses_total", "Block cache misses.", true, func(m node.Metrics) float64 { return float64(m.Engine.BlockCacheMisses) }},
	{"shoal_storage_served_block_bytes_total", "Bytes of the blocks this node's own reads loaded (not those of ranges it streamed out, nor of its compactions).", true, func(m node.Metrics) float64 { return float64(m.Engine.ServedBlockBytes) }},
	{"shoal_storage_served_block_bytes_in_cache_total", "Of shoal_storage_served_block_bytes_total, the bytes found in the block cache.", true, func(m node.Metrics) float64 { return float64(m.Engine.ServedBlockBytesInCache) }},
	{"shoal_storage_stream_block_bytes_total", "Bytes of the blocks read to stream ranges out of this node (raft snapshots).", true, func(m node.Metrics) float64 { return float64(m.Engine.StreamBlockBytes) }},
	{"shoal_storage_block_cache_hit_ratio", "Block cache hit ratio over about the last 10 s (NaN without lookups).", false, func(m node.Metrics) float64 { return m.CacheHitRatio }},
	{"shoal_storage_disk_utilization", "Share of the disk's capacity in use over its last sample (emulated device budget, or Linux io_ticks; 0 when unknown).", false, func(m node.Metrics) float64 { return m.DiskUtilization }},
	{"shoal_storage_ioprio_errors_total", "Failed calls that put a prefetch's reading thread in the kernel's idle I/O class (the read then ran in the normal class).", true, func(m node.Metrics) float64 { return float64(m.Engine.IOPrioErrors) }},
	{"shoal_storage_compactions_total", "Compactions completed.", true, func(m node.Metrics) float64 { return float64(m.Engine.CompactionsDone) }},
	{"shoal_storage_compactions_running", "Compactions running now.", false, func(m node.Metrics) float64 { return float64(m.Engine.CompactionsRunning) }},
	{"shoal_storage_flushes_total", "Memtable flushes completed.", true, func(m node.Metrics) float64 { return float64(m.Engine.FlushesDone) }},
	{"shoal_storage_write_stalls_total", "Write stalls begun.", true, func(m node.Metrics) float64 { return float64(m.Engine.WriteStalls) }},
	{"shoal_storage_l0_files", "Files in L0.", false, func(m node.Metrics) float64 { return float64(m.Engine.L0Files) }},
	{"shoal_storage_memtable_bytes", "Bytes in memtables.", false, func(m node.Metrics) float64 { return float64(m.Engine.MemtableBytes) }},
	{"shoal_storage_disk_bytes", "Bytes of tables and WAL on disk.", false, func(m node.Metrics) float64 { return float64(m.Engine.DiskBytes) }},
	{"shoal_storage_compaction_debt_bytes", "Estimated compaction debt.", false, func(m node.Metrics) float64 { return float64(m.Engine.CompactionDebtBytes) }},
	{"shoal_replicas", "Replicas on this node.", false, func(m node.Metrics) float64 { return float64(m.Replicas) }},
	{"shoal_range_leaders", "Ranges led by this node.", false, func(m node.Metrics) float64 { return float64(m.Leaders) }},
	{"shoal_replicas_awake", "Replicas ticking (not quiesced).", false, func(m node.Metrics) float64 { return float64(m.Active) }},
	{"shoal_admission_requests_inflight", "Client requests being served (admission control).", false, func(m node.Metrics) float64 { return float64(m.AdmissionRequests.InFlight) }},
	{"shoal_admission_requests_inflight_bytes", "Bytes held by client requests being served, with scan results.", false, func(m node.Metrics) float64 { return float64(m.AdmissionRequests.Bytes) }},
	{"shoal_admission_requests_admitted_total", "Client requests admitted.", true, func(m node.Metrics) float64 { return float64(m.AdmissionRequests.Admitted) }},
	{"shoal_admission_requests_refused_total", "Client requests refused with OVERLOADED.", true, func(m node.Metrics) float64 { return float64(m.AdmissionRequests.Refused) }},
	{"shoal_admission_writes_inflight", "Client writes held in raft by this node's leaders (proposed, not applied).", false, func(m node.Metrics) float64 { return float64(m.AdmissionWrites.InFlight) }},
	{"shoal_admission_writes_inflight_bytes", "Bytes of client writes held in raft by this node's leaders.", false, func(m node.Metrics) float64 { return float64(m.AdmissionWrites.Bytes) }},
	{"shoal_admission_writes_refused_total", "Client writes refused with OVERLOADED by the proposal gate.", true, func(m node.Metrics) float64 { return float64(m.AdmissionWrites.Refused) }},
	{"shoal_jobs_runs_on_time_total", "Scan-job runs this node finished by their deadline.", true, func(m node.Metrics) float64 { return float64(m.Jobs.OnTime) }},
	{"shoal_jobs_runs_late_total", "Scan-job runs this node finished after their deadline.", true, func(m node.Metrics) float64 { return float64(m.Jobs.Late) }},
	{"shoal_jobs_runs_failed_total", "Scan-job runs this node gave up (an error, a lost meta leadership, a removed job).", true, func(m node.Metrics) float64 { return float64(m.Jobs.Failed) }},
	{"shoal_jobs_runs_abandoned_total", "Scan-job runs of other nodes (or of this node before a restart) this node found silent and replaced.", true, func(m node.Metrics) float64 { return float64(m.Jobs.Abandoned) }},
	{"shoal_jobs_runs_running", "Scan-job runs going on this node now.", false, func(m node.Metrics) float64 { return float64(m.Jobs.Running) }},
	{"shoal_jobs_read_rows_total", "Rows read by this node's scan-job runs.", true, func(m node.Metrics) float64 { return float64(m.Jobs.Rows) }},
	{"shoal_jobs_read_bytes_total", "Bytes of keys and values read by this node's scan-job runs.", true, func(m node.Metrics) float64 { return float64(m.Jobs.Bytes) }},
	{"shoal_jobs_refused_total", "Scan-job due times this node's prefetch plan refused (their reads no longer fit the disks' budgets).", true, func(m node.Metrics) float64 { return float64(m.Jobs.Refused) }},
	{"shoal_jobs_prefetches_total", "Copies of scan-job spans this node began to read ahead.", true, func(m node.Metrics) float64 { return float64(m.Jobs.Prefetches) }},
	{"shoal_jobs_prefetch_bytes_total", "Bytes this node's scan-job prefetches read.", true, func(m node.Metrics) float64 { return float64(m.Jobs.PrefetchBytes) }},
	{"shoal_jobs_cache_bytes_total", "Bytes scan-job runs read from copies instead of the disks.", true, func(m node.Metrics) float64 { return float64(m.Jobs.CacheBytes) }},
	{"shoal_jobs_copies_bytes", "Bytes of scan-job copies this node holds now.", false, func(m node.Metrics) float64 { return float64(m.Jobs.Held) }},
	{"shoal_stream_events_applied_total", "Stream events whose effect this node's tasks committed.", true, func(m node.Metrics) float64 { return float64(m.Streams.Applied) }},
	{"shoal_stream_events_retried_total", "Stream events this node answered RETRY (not led here, or not applied yet).", true, func(m node.Metrics) float64 { return float64(m.Streams.Retries) }},
	{"shoal_stream_state_local_total", "Stream tasks' state reads and writes served by this node's own replicas (it led the key's range).", true, func(m node.Metrics) float64 { return float64(m.Streams.LocalReads + m.Streams.LocalWrites) }},
	{"shoal_stream_state_remote_total", "Stream tasks' state reads and writes this node sent to another node.", true, func(m node.Metrics) float64 { return float64(m.Streams.RemoteReads + m.Streams.RemoteWrites) }},
	{"shoal_usage_predicted", "This node's usage (CPU share plus disk busy, 1: saturated) as the usage model predicts it from its ranges.", false, func(m node.Metrics) float64 { return m.PredictedUsage }},
	{"shoal_usage_measured", "This node's measured usage (CPU share plus disk busy, 1: saturated).", false, func(m node.Metrics) float64 { return m.MeasuredUsage }},
	{"shoal_usage_node_wanted", "1 when the autopilot on this node (the meta range's leader) asks for one more node: usage_balance predicts a node above its threshold with no move that lowers it.", false, func(m node.Metrics) float64 {
		if m.AsksForNode {
			return 1
		}
		return 0
	}},
	{"shoal_jobs_plan_peak_bytes_per_second", "The current scan-job plan's highest disk bandwidth on one node.", false, func(m node.Metrics) float64 { return m.Jobs.PlanPeak }},
	{"shoal_jobs_plan_bound_bytes_per_second", "The LP relaxation's least peak disk bandwidth for the runs the current scan-job plan admits.", false, func(m node.Metrics) float64 { return m.Jobs.PlanBound }},
}

func newNodeCollector(read func() node.Metrics) *nodeCollector {
	c := &nodeCollector{read: read, desc: map[string]*prometheus.Desc{}}
	for _, d := range nodeMetricDefs {
		c.desc[d.name] = prometheus.NewDesc(d.name, d.help, nil, nil)
	}
	c.desc[operatorsMetric] = prometheus.NewDesc(operatorsMetric,
		"Autopilot decisions that finished while this node ran the autopilot, by policy, operator kind and outcome (succeeded, failed, canceled, timed out, replaced, stopped).",
		[]string{"policy", "kind", "outcome"}, nil)
	return c
}

// Describe implements prometheus.Collector.
func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.read()
	for _, d := range nodeMetricDefs {
		t := prometheus.GaugeValue
		if d.counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.desc[d.name], t, d.value(m))
	}
	for k, v := range m.Operators {
		ch <- prometheus.MustNewConstMetric(c.desc[operatorsMetric], prometheus.CounterValue, float64(v), k.Policy, k.Kind, k.Outcome)
	}
}

const operatorsMetric = "shoal_autopilot_operators_total"
