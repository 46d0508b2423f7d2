// Package core holds the core store's own benchmarks: durable write throughput of one node against
// the group-commit ceiling of raw Pebble on the same disk, and the memory and CPU cost of idle ranges.
// Benchmarks are not tests: they run real nodes and report numbers; they assert nothing.
package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// GroupCommitReport compares synced writes through Shoal with synced raw Pebble batches. Each
// phase reports its throughput, the process's CPU time per write (clients included: they share the
// process) and its read and write system calls per write (/proc/self/io; fsyncs, futexes and polls
// are not among them: count those with perf, see docs/design/write-path.md).
type GroupCommitReport struct {
	Threads          int        `json:"threads"`
	ValueBytes       int        `json:"value_bytes"`
	Seconds          float64    `json:"seconds_per_run"`
	RawPebbleOpsSec  float64    `json:"raw_pebble_synced_ops_per_sec"`
	InProcessOpsSec  float64    `json:"shoal_node_api_in_process_ops_per_sec"`
	InProcessPc      float64    `json:"shoal_node_api_percent_of_ceiling"`
	ShoalOpsSec      float64    `json:"shoal_grpc_client_ops_per_sec"`
	ShoalOfCeilingPc float64    `json:"shoal_grpc_client_percent_of_ceiling"`
	Raw              *PhaseCost `json:"raw_pebble,omitempty"`
	InProcess        *PhaseCost `json:"shoal_node_api_in_process,omitempty"`
	GRPC             *PhaseCost `json:"shoal_grpc_client,omitempty"`
	LoopCycles       uint64     `json:"raft_loop_cycles"`
	LoopSyncs        uint64     `json:"raft_loop_fsyncs"`
	EntriesWritten   uint64     `json:"raft_entries_written"`
}

// PhaseCost is what one phase's writes cost the process.
type PhaseCost struct {
	Ops             int64   `json:"ops"`
	CPUMicrosPerOp  float64 `json:"cpu_us_per_write"`
	RWSyscallsPerOp float64 `json:"read_write_syscalls_per_write"`
}

// The phases of GroupCommit, in the order they run.
const (
	PhaseRaw       = "raw"
	PhaseInProcess = "in-process"
	PhaseGRPC      = "grpc"
)

// Phases lists every phase of GroupCommit.
func Phases() []string { return []string{PhaseRaw, PhaseInProcess, PhaseGRPC} }

// GroupCommit runs the phases in dir one after the other (all of them when phases is empty).
func GroupCommit(ctx context.Context, dir string, threads, valueBytes int, d time.Duration, phases ...string) (GroupCommitReport, error) {
	rep := GroupCommitReport{Threads: threads, ValueBytes: valueBytes, Seconds: d.Seconds()}
	want := func(p string) bool { return len(phases) == 0 || slices.Contains(phases, p) }
	for _, p := range phases {
		if !slices.Contains(Phases(), p) {
			return rep, fmt.Errorf("unknown phase %q: use %v", p, Phases())
		}
	}
	value := make([]byte, valueBytes)
	var n atomic.Int64
	if want(PhaseRaw) {
		// Raw Pebble: every writer commits its own synced batch; Pebble's commit pipeline groups the
		// concurrent fsyncs, which is the best one engine can do on this disk.
		eng, err := storage.Open(filepath.Join(dir, "raw"), storage.Options{CreateIfMissing: true})
		if err != nil {
			return rep, err
		}
		rep.Raw = measure(threads, d, &n, func(w, i int) bool {
			b := eng.NewBatch()
			defer b.Close()
			_ = b.Set(storage.UserDataKey(fmt.Appendf(nil, "w%02d-%09d", w, i)), value)
			return b.Commit(true) == nil
		})
		rep.RawPebbleOpsSec = float64(rep.Raw.Ops) / d.Seconds()
		eng.Close()
	}
	if !want(PhaseInProcess) && !want(PhaseGRPC) {
		return rep, nil
	}

	node, err := startNode(ctx, filepath.Join(dir, "shoal"))
	if err != nil {
		return rep, err
	}
	defer node.Kill()
	cl, err := client.New(ctx, client.Config{Addrs: []string{node.Addr}})
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	if err := waitWritable(ctx, cl); err != nil {
		return rep, err
	}
	pc := func(ops float64) float64 {
		if rep.RawPebbleOpsSec == 0 {
			return 0
		}
		return 100 * ops / rep.RawPebbleOpsSec
	}
	if want(PhaseInProcess) {
		// The node's own API in process: raft log, group commit and apply without gRPC. On a 2-core
		// machine the gRPC run below shares the cores with its load generator, so both are reported.
		rep.InProcess = measure(threads, d, &n, func(w, i int) bool {
			resp, err := node.KV.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "p%02d-%09d", w, i), Value: value})
			return err == nil && resp.Error == nil
		})
		rep.InProcessOpsSec = float64(rep.InProcess.Ops) / d.Seconds()
		rep.InProcessPc = pc(rep.InProcessOpsSec)
	}
	if want(PhaseGRPC) {
		rep.GRPC = measure(threads, d, &n, func(w, i int) bool {
			return cl.Put(ctx, fmt.Appendf(nil, "w%02d-%09d", w, i), value) == nil
		})
		rep.ShoalOpsSec = float64(rep.GRPC.Ops) / d.Seconds()
		rep.ShoalOfCeilingPc = pc(rep.ShoalOpsSec)
	}
	ls := node.KV.Store().LoopStats()
	rep.LoopCycles, rep.LoopSyncs, rep.EntriesWritten = ls.Cycles, ls.Syncs, ls.EntriesWritten
	return rep, nil
}

// measure runs op on threads writers for d and reports the successful writes and their cost.
func measure(threads int, d time.Duration, n *atomic.Int64, op func(worker, i int) bool) *PhaseCost {
	n.Store(0)
	c0, s0 := cpuTime(), rwSyscalls()
	run(threads, d, func(w, i int) {
		if op(w, i) {
			n.Add(1)
		}
	})
	c1, s1 := cpuTime(), rwSyscalls()
	pc := &PhaseCost{Ops: n.Load()}
	if pc.Ops > 0 {
		pc.CPUMicrosPerOp = float64((c1 - c0).Microseconds()) / float64(pc.Ops)
		if s0 >= 0 && s1 >= 0 {
			pc.RWSyscallsPerOp = float64(s1-s0) / float64(pc.Ops)
		}
	}
	return pc
}

// rwSyscalls is the process's count of read and write system calls so far (syscr + syscw of
// /proc/self/io), or -1 where that file does not exist.
func rwSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	var total int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "syscr" || k == "syscw") {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			total += n
		}
	}
	return total
}

func run(threads int, d time.Duration, op func(worker, i int)) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				op(w, i)
			}
		}(w)
	}
	wg.Wait()
}

func waitWritable(ctx context.Context, cl *client.Client) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cl.Put(ctx, []byte("warmup"), []byte("x"))
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node not writable: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNode bootstraps a one-node cluster in dir, serving gRPC on a loopback port.
func startNode(ctx context.Context, dir string) (*benchutil.Node, error) {
	lis, err := benchutil.Listen()
	if err != nil {
		return nil, err
	}
	n, err := benchutil.StartNode(ctx, benchutil.NodeSpec{Dir: dir, Create: true, Listener: lis, Config: benchutil.NodeConfig{Bootstrap: true}})
	if err != nil {
		lis.Close()
	}
	return n, err
}

// IdleReport is the cost of a node holding many idle ranges.
type IdleReport struct {
	Ranges             int     `json:"ranges"`
	HeapBytesBefore    uint64  `json:"heap_bytes_before"`
	HeapBytesAfter     uint64  `json:"heap_bytes_after"`
	BytesPerRange      float64 `json:"heap_bytes_per_idle_range"`
	ActiveReplicas     int     `json:"replicas_still_ticking"`
	IdleSeconds        float64 `json:"idle_seconds_measured"`
	IdleCPUPercent     float64 `json:"idle_cpu_percent_of_one_core"`
	RaftMessagesPerSec float64 `json:"raft_messages_sent_per_sec"`
}

// IdleRanges creates a node whose store holds ranges ranges (written directly as split products
// would be, which is much faster than 10 000 online splits), lets them quiesce, then measures heap
// per range and the process's CPU while idle.
func IdleRanges(ctx context.Context, dir string, ranges int, idle time.Duration) (IdleReport, error) {
	rep := IdleReport{Ranges: ranges, IdleSeconds: idle.Seconds()}
	node, err := startNode(ctx, dir)
	if err != nil {
		return rep, err
	}
	cl, err := client.New(ctx, client.Config{Addrs: []string{node.Addr}})
	if err == nil {
		err = waitWritable(ctx, cl)
		cl.Close()
	}
	node.Kill()
	if err != nil {
		return rep, err
	}
	rep.HeapBytesBefore = heap()

	// Write the extra ranges' initial state directly into the stopped node's engine.
	eng, err := storage.Open(dir, storage.Options{})
	if err != nil {
		return rep, err
	}
	st := replica.NewStore(replica.Config{NodeID: 1, Engine: eng})
	for i := 0; i < ranges; i++ {
		id := uint64(1000 + i)
		d := &pb.RangeDescriptor{RangeId: id, StartKey: []byte(fmt.Sprintf("\xffidle/%08d", i)), EndKey: []byte(fmt.Sprintf("\xffidle/%08d", i+1)),
			Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
		if err := st.Bootstrap(d, nil); err != nil {
			eng.Close()
			return rep, err
		}
	}
	eng.Close()

	baseHeap := heap()
	eng, err = storage.Open(dir, storage.Options{})
	if err != nil {
		return rep, err
	}
	tr := transport.New(transport.Config{NodeID: 1}, nil)
	st = replica.NewStore(replica.Config{NodeID: 1, Engine: eng, Transport: tr})
	if err := st.Load(); err != nil {
		return rep, err
	}
	st.Start()
	defer func() {
		st.Stop()
		tr.Close()
		eng.Close()
	}()
	for _, r := range st.Replicas() {
		r.Campaign()
	}
	// Wait until elections are done and the ranges quiesce.
	deadline := time.Now().Add(2 * time.Minute)
	for st.ActiveReplicas() > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	rep.ActiveReplicas = st.ActiveReplicas()
	rep.HeapBytesAfter = heap()
	rep.HeapBytesBefore = baseHeap
	rep.BytesPerRange = float64(rep.HeapBytesAfter-baseHeap) / float64(ranges)
	before := tr.Stats().MessagesSent
	c0 := cpuTime()
	time.Sleep(idle)
	c1 := cpuTime()
	rep.IdleCPUPercent = 100 * (c1 - c0).Seconds() / idle.Seconds()
	rep.RaftMessagesPerSec = float64(tr.Stats().MessagesSent-before) / idle.Seconds()
	return rep, nil
}

func heap() uint64 {
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
