// Package ycsb runs YCSB's core workloads against Shoal and against peer systems, using go-ycsb
// (github.com/pingcap/go-ycsb) as a library: its core workload (pkg/workload) generates keys, values
// and the operation mix; this package supplies the drivers, the bindings and the measurements.
//
// Bindings (see Open): TargetGRPC is ShoalDB, a go-ycsb DB over Shoal's Go client that stores each
// record as one key whose value is the record's field map in EncodeRecord's format; TargetEtcd is
// go-ycsb's own etcd binding, used unchanged as the peer; TargetRESP is go-ycsb's own redis binding
// (go-redis), used unchanged, in cluster mode against Shoal's RESP listeners or in plain mode
// against one address (a redis-server as the peer), with records stored as strings. The redis
// binding has no range scans, so workload E is refused on TargetRESP (ErrUnsupported).
//
// Run executes a load phase (inserting the records) and a run phase (the workload's operation mix)
// on a number of worker goroutines, each phase bounded by an operation count and a maximum duration.
// Every operation's latency goes into an HdrHistogram (1µs to 60s, 3 significant digits) per operation
// kind; the Report gives per-kind counts, errors and p50/p95/p99/p99.9 in milliseconds, the
// throughput, and optionally a per-second timeline. Compare renders reports of several systems as a
// Markdown comparison.
//
// Workloads follow upstream YCSB's definitions (zipfian requests; latest for D; scans of up to 100
// records for E), not go-ycsb's copies, which use uniform requests.
package ycsb
