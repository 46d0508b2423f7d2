package move

import (
	"context"
	"fmt"
	"io"
	mrand "math/rand"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// load writes the records in batches of about 1 MiB from two writers.
func load(ctx context.Context, cl *client.Client, opts Options, records int64, rep *Report, p *progress) error {
	start := time.Now()
	l := benchutil.Load{Records: int(records), Batch: max(1, (1<<20)/(keyBytes+opts.ValueBytes)), Writers: 2,
		Key: func(i int) []byte { return key(int64(i)) },
		Values: func(w int) func() []byte {
			rng := rand.NewChaCha8([32]byte{byte(w), 'l', 'o', 'a', 'd'})
			return func() []byte {
				v := make([]byte, opts.ValueBytes)
				_, _ = rng.Read(v)
				return v
			}
		},
		Progress: func(n int) {
			b := int64(n) * int64(keyBytes+opts.ValueBytes)
			p.printf("loading %s", benchutil.Bar(float64(n)/float64(records), fmt.Sprintf("%d/%d MiB, %.1f MiB/s",
				b>>20, opts.SizeBytes>>20, float64(b)/(1<<20)/time.Since(start).Seconds())))
		}}
	retries, err := l.Run(ctx, cl)
	if err != nil {
		return err
	}
	d := time.Since(start).Seconds()
	bytes := records * int64(keyBytes+opts.ValueBytes)
	rep.Load = LoadStats{Records: records, Bytes: bytes, DurationS: d, BytesPerSec: float64(bytes) / d, Retries: retries}
	p.printf("loaded %d records, %d MiB in %.1fs (%.1f MiB/s)", records, bytes>>20, d, float64(bytes)/(1<<20)/d)
	return nil
}

// Phases of the workload, in order.
var phaseNames = []string{"warmup", "before", "during", "after"}

// measure runs the closed-loop workload through warmup, baseline, move and after, and fills in the
// phases, the move and the per-second series.
func measure(ctx context.Context, c cluster, cl *client.Client, opts Options, records int64, rep *Report, p *progress) error {
	stats, stopStats := c.pollStats(100*time.Millisecond, rep.Move.RangeID)
	defer stopStats()
	start := time.Now()
	clients := benchutil.StartClients(ctx, opts.Threads, func(w int) func(context.Context) error {
		r := mrand.New(mrand.NewSource(start.UnixNano() + int64(w)))
		zipf := generator.NewScrambledZipfian(0, records-1, ZipfianConstant)
		vr := rand.NewChaCha8([32]byte{byte(w), 'r', 'u', 'n'})
		value := make([]byte, opts.ValueBytes)
		return func(ctx context.Context) error {
			k := key(zipf.Next(r))
			if r.Float64() < ReadFraction {
				_, _, err := cl.Get(ctx, k)
				return err
			}
			_, _ = vr.Read(value)
			return cl.Put(ctx, k, value)
		}
	})
	s := &sampler{stats: stats, clients: clients, start: start, mv: &rep.Move, done: make(chan struct{}), stop: make(chan struct{}), p: p}
	go s.loop()
	finish := func() {
		clients.Stop()
		close(s.stop)
		<-s.done
		stopStats()
		rep.Series, rep.Move.Events = s.series, append([]Event{}, s.events...)
		rep.Errors, _, rep.ErrorSample = clients.Errors()
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if !sleep(opts.Warmup) {
		finish()
		return ctx.Err()
	}
	clients.Phase()
	s.phase.Store(1)
	beforeStart := time.Now()
	if !sleep(opts.Before) {
		finish()
		return ctx.Err()
	}
	phase := func(d time.Duration) Phase { h, errs := clients.Phase(); return phaseOf(h, errs, d) }
	rep.Before = phase(time.Since(beforeStart))
	s.phase.Store(2)
	moveStart := time.Now()
	doMove(ctx, c, opts, s)
	moveEnd := time.Now()
	rep.During = phase(moveEnd.Sub(moveStart))
	s.phase.Store(3)
	if ctx.Err() == nil {
		sleep(opts.After)
	}
	rep.After = phase(time.Since(moveEnd))
	finish()
	if err := ctx.Err(); err != nil {
		return err
	}
	mv := &rep.Move
	mv.StartS, mv.EndS, mv.DurationS = moveStart.Sub(start).Seconds(), moveEnd.Sub(start).Seconds(), moveEnd.Sub(moveStart).Seconds()
	rate := float64(opts.RateBytesPerSec)
	mv.RangeBytes = rep.Load.Bytes
	mv.ExpectedS = float64(mv.RangeBytes) / rate
	if mv.DurationS > 0 {
		mv.MoveTimeRatio = mv.DurationS / mv.ExpectedS
		mv.EffectiveRateBytesSec = float64(mv.RangeBytes) / mv.DurationS
		mv.EffectiveRateRatio = mv.EffectiveRateBytesSec / rate
	}
	mv.SendingS = s.sending.Seconds()
	if mv.SendingS > 0 {
		mv.SendRateBytesSec = float64(mv.SnapshotBytes) / mv.SendingS
		mv.SendRateRatio = mv.SendRateBytesSec / rate
	}
	mv.PeakSendRateBytesSec, mv.PeakSendRateRatio = s.peakRate, s.peakRate/rate
	if rep.Before.P50Ms > 0 {
		rep.P50Ratio, rep.P99Ratio = rep.During.P50Ms/rep.Before.P50Ms, rep.During.P99Ms/rep.Before.P99Ms
	}
	if rep.Before.Throughput > 0 {
		rep.ThroughputRatio = rep.During.Throughput / rep.Before.Throughput
	}
	return nil
}

// doMove relocates the replica and records what the nodes' counters say the move did.
func doMove(ctx context.Context, c cluster, opts Options, s *sampler) {
	mv := s.mv
	bytes0, snaps0, stalls0 := sums(s.stats)
	applied0 := statsOf(s.stats, mv.ToNode).snapsApplied.Load()
	s.moving.Store(true)
	d, attempts, retryErrs, err := relocate(ctx, c, opts.MoveTimeout, mv.RangeID, mv.ToNode, mv.FromNode)
	s.moving.Store(false)
	time.Sleep(200 * time.Millisecond) // the pollers' next readings
	bytes1, snaps1, stalls1 := sums(s.stats)
	mv.SnapshotBytes, mv.Snapshots, mv.WriteStalls = bytes1-bytes0, snaps1-snaps0, stalls1-stalls0
	mv.SnapshotsApplied = statsOf(s.stats, mv.ToNode).snapsApplied.Load() - applied0
	mv.Attempts, mv.RetryErrors = attempts, retryErrs
	switch {
	case err != nil:
		mv.Error = err.Error()
	default:
		mv.VotersTo = voters(d)
		mv.Done = holds(d, mv.ToNode, true) && !holds(d, mv.FromNode, false)
		if !mv.Done {
			mv.Error = fmt.Sprintf("relocate returned replicas %v", d.GetReplicas())
		}
	}
}

// sampler reads the nodes' latest counters every 100 ms (snapshot bytes flowing, snapshots accepted
// and applied) and makes a point every second.
type sampler struct {
	stats      []*nodeStats
	clients    *benchutil.Clients
	start      time.Time
	mv         *MoveStats
	p          *progress
	phase      atomic.Int32
	moving     atomic.Bool
	stop, done chan struct{}
	// Written by loop, read once it is done.
	sending    time.Duration // time snapshot bytes were flowing during the move
	lastGrowth time.Time
	events     []Event
	peakRate   float64
	series     []Point
}

func (s *sampler) loop() {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	prevBytes, _, _ := sums(s.stats)
	prevSent, prevApplied := make([]uint64, len(s.stats)), make([]uint64, len(s.stats))
	for i, st := range s.stats {
		prevSent[i], prevApplied[i] = st.snapsSent.Load(), st.snapsApplied.Load()
	}
	secStartBytes, lastPoint := prevBytes, s.start
	for n := 1; ; n++ {
		var now time.Time
		select {
		case <-s.stop:
			return
		case now = <-tick.C:
		}
		t := now.Sub(s.start).Seconds()
		b, _, _ := sums(s.stats)
		if b > prevBytes && s.moving.Load() {
			// Chunks leave every chunk/rate seconds (250 ms for 1 MiB at 4 MiB/s): growth seen less
			// than a second apart is one stretch of sending.
			if !s.lastGrowth.IsZero() && now.Sub(s.lastGrowth) <= time.Second {
				s.sending += now.Sub(s.lastGrowth)
			} else {
				s.sending += 100 * time.Millisecond
			}
			s.lastGrowth = now
		}
		prevBytes = b
		for i, st := range s.stats {
			if v := st.snapsSent.Load(); v != prevSent[i] {
				s.events = append(s.events, Event{T: t, What: fmt.Sprintf("n%d: snapshot accepted by its receiver (%d so far)", st.id, v)})
				prevSent[i] = v
			}
			if v := st.snapsApplied.Load(); v != prevApplied[i] {
				what := fmt.Sprintf("n%d: snapshot applied (%d so far)", st.id, v)
				if la := leaderApplied(s.stats); st.id == s.mv.ToNode && la > 0 {
					a := st.applied.Load()
					what += fmt.Sprintf(" at index %d; leader applied %d (%d entries ahead)", a, la, int64(la)-int64(a))
				}
				s.events = append(s.events, Event{T: t, What: what})
				prevApplied[i] = v
			}
		}
		if n%10 != 0 {
			continue
		}
		sec := s.clients.Second()
		pt := Point{T: t, Phase: phaseNames[s.phase.Load()], Ops: sec.Ops, Errors: sec.Errors, IntervalS: now.Sub(lastPoint).Seconds(),
			P50Ms: benchutil.Quantile(sec.Hist, 50), P99Ms: benchutil.Quantile(sec.Hist, 99),
			LeaderApplied: leaderApplied(s.stats), NewReplicaApplied: statsOf(s.stats, s.mv.ToNode).applied.Load()}
		pt.OpsPerSec = float64(pt.Ops) / pt.IntervalS
		pt.SnapshotBytesS = float64(b-secStartBytes) / pt.IntervalS
		secStartBytes, lastPoint = b, now
		if pt.Phase == "during" {
			s.peakRate = max(s.peakRate, pt.SnapshotBytesS)
		}
		s.series = append(s.series, pt)
		s.p.printf("t=%3.0fs %-6s %6.0f ops/s p99 %6.1f ms snapshot %5.1f MiB/s", pt.T, pt.Phase, pt.OpsPerSec, pt.P99Ms, pt.SnapshotBytesS/(1<<20))
	}
}

// relocate moves rangeID's replica from remove to add through a node that is neither (any node
// forwards to the leader), retrying retryable answers until timeout.
func relocate(ctx context.Context, c cluster, timeout time.Duration, rangeID, add, remove uint64) (*pb.RangeDescriptor, int, []string, error) {
	addr := c.Addrs()[0]
	for _, n := range c.nodes() {
		if id := n.KV.NodeID(); id != add && id != remove {
			addr = n.Addr
			break
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, 0, nil, err
	}
	defer conn.Close()
	sc := pb.NewShoalClient(conn)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []string
	for attempt := 1; ; attempt++ {
		resp, err := sc.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rangeID, AddNodeId: add,
			RemoveNodeId: remove, Step: pb.RelocateStep_RELOCATE_ALL})
		if err == nil && resp.GetError() == nil {
			return resp.GetRange(), attempt, errs, nil
		}
		retry := true
		if err == nil {
			e := resp.GetError()
			err = fmt.Errorf("%s: %s", e.GetCode(), e.GetMessage())
			retry = e.GetCode() != pb.ErrorCode_INVALID_ARGUMENT
		}
		errs = append(errs, err.Error())
		if !retry || ctx.Err() != nil {
			return nil, attempt, errs, fmt.Errorf("relocate range %d n%d→n%d after %d attempt(s): %s", rangeID, remove, add, attempt, strings.Join(errs, "; "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// verify waits for every voter to apply the same index, digests every voter's copy, moves the
// leadership to the new node and reads a sample of keys through it.
func verify(ctx context.Context, c cluster, cl *client.Client, records int64, valueBytes int, rep *Report) {
	mv, v := &rep.Move, &rep.Verify
	v.KeysExpected = records
	if !mv.Done {
		return
	}
	// A write cut short when the workload stopped may still commit: digest until every voter's copy
	// was read at one and the same applied index.
	for try := 0; try < 20; try++ {
		_ = benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return c.caughtUp(mv.RangeID, mv.VotersTo) })
		v.Replicas, v.DigestsMatch = nil, true
		stable := true
		for _, n := range mv.VotersTo {
			d := ReplicaDigest{Node: n, Error: "no local replica"}
			if r := c.replicaOn(n, mv.RangeID); r != nil {
				d = digest(n, r)
			}
			v.Replicas = append(v.Replicas, d)
			stable = stable && d.Applied == v.Replicas[0].Applied && !strings.HasPrefix(d.Error, "applied index moved")
			v.DigestsMatch = v.DigestsMatch && d.Error == "" && d.Keys == records && d.CRC64 == v.Replicas[0].CRC64
		}
		if stable {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Move the leadership to the new replica and read through it.
	err := benchutil.WaitFor(ctx, time.Minute, func() bool {
		if c.leaderOf(mv.RangeID) == mv.ToNode {
			return true
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = cl.TransferLeader(tctx, mv.RangeID, mv.ToNode)
		time.Sleep(300 * time.Millisecond)
		return c.leaderOf(mv.RangeID) == mv.ToNode
	})
	v.LeaderMoved = err == nil
	if err != nil {
		v.LeaderError = err.Error()
	}
	nr := c.replicaOn(mv.ToNode, mv.RangeID)
	var reads0 uint64
	if nr != nil {
		reads0 = nr.Reads.Load()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	v.SampleReads = 1000
	for i := 0; i < v.SampleReads; i++ {
		val, found, err := cl.Get(ctx, key(rng.Int64N(records)))
		switch {
		case err != nil:
			v.SampleErrors++
		case found && len(val) == valueBytes:
			v.SampleFound++
		}
	}
	if nr != nil {
		v.ReadsOnNewNode = nr.Reads.Load() - reads0
	}
	// The removed replica is garbage-collected by its node's queue once it learns of the change.
	_ = benchutil.WaitFor(ctx, 20*time.Second, func() bool { return c.replicaOn(mv.FromNode, mv.RangeID) == nil })
	v.OldReplicaGone = c.replicaOn(mv.FromNode, mv.RangeID) == nil
	v.OK = v.DigestsMatch && len(v.Replicas) == ReplicationFactor && v.LeaderMoved &&
		v.SampleErrors == 0 && v.SampleFound == v.SampleReads && v.ReadsOnNewNode >= uint64(v.SampleReads)
}

// WriteSummary prints the report for people.
func WriteSummary(w io.Writer, rep *Report) {
	s, mv := rep.Settings, rep.Move
	mib := func(b float64) float64 { return b / (1 << 20) }
	fmt.Fprintf(w, "range %d: %d records, %.0f MiB (keys+values), %d nodes, RF %d, %d threads, %.0f%% reads, %s\n",
		mv.RangeID, s.Records, mib(float64(rep.Load.Bytes)), s.Nodes, s.ReplicationFactor, s.Threads, 100*s.ReadFraction, s.Distribution)
	fmt.Fprintf(w, "load: %.1fs (%.1f MiB/s), replicas applied after %.1fs more, compactions settled in %.1fs\n",
		rep.Load.DurationS, mib(rep.Load.BytesPerSec), rep.Load.ReplicatedS, rep.Load.SettledS)
	status := "done"
	if !mv.Done {
		status = "FAILED: " + mv.Error
	}
	fmt.Fprintf(w, "move n%d→n%d (leader n%d): %s after %d attempt(s)\n", mv.FromNode, mv.ToNode, mv.LeaderNode, status, mv.Attempts)
	fmt.Fprintf(w, "  move time %.1fs; one snapshot of the range (%.1f MiB) at the configured %.1f MiB/s takes %.1fs: ratio %.2f\n",
		mv.DurationS, mib(float64(mv.RangeBytes)), mib(float64(mv.ConfiguredRateBytesSec)), mv.ExpectedS, mv.MoveTimeRatio)
	fmt.Fprintf(w, "  effective rate %.1f MiB/s of range moved per second (%.2f× configured)\n", mib(mv.EffectiveRateBytesSec), mv.EffectiveRateRatio)
	fmt.Fprintf(w, "  snapshots: %d accepted, %d applied by n%d, %.1f MiB sent in %.1fs of sending: %.1f MiB/s (%.2f× configured), peak second %.1f MiB/s (%.2f×)\n",
		mv.Snapshots, mv.SnapshotsApplied, mv.ToNode, mib(float64(mv.SnapshotBytes)), mv.SendingS, mib(mv.SendRateBytesSec), mv.SendRateRatio,
		mib(mv.PeakSendRateBytesSec), mv.PeakSendRateRatio)
	for _, e := range mv.Events {
		if strings.HasPrefix(e.What, fmt.Sprintf("n%d: snapshot applied", mv.ToNode)) {
			fmt.Fprintf(w, "    t=%.1fs %s\n", e.T, e.What)
		}
	}
	fmt.Fprintf(w, "foreground   %8s %10s %9s %9s %9s %7s\n", "seconds", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "errors")
	for i, ph := range []Phase{rep.Before, rep.During, rep.After} {
		fmt.Fprintf(w, "  %-10s %8.1f %10.0f %9.2f %9.2f %9.2f %7d\n", phaseNames[i+1], ph.DurationS, ph.Throughput, ph.P50Ms, ph.P99Ms, ph.P999Ms, ph.Errors)
	}
	fmt.Fprintf(w, "during/before: p99 %.2f×, p50 %.2f×, throughput %.2f×; errors %d in all\n", rep.P99Ratio, rep.P50Ratio, rep.ThroughputRatio, rep.Errors)
	fmt.Fprintf(w, "peak memory of the process (4 nodes + workload): %.1f GiB\n", float64(rep.MaxRSSBytes)/(1<<30))
	v := rep.Verify
	ok := "OK"
	if !v.OK {
		ok = "FAILED"
	}
	fmt.Fprintf(w, "verify %s: digests match %v over %d replicas (%d keys expected), leadership on n%d %v, %d/%d sample reads found (%d served by n%d), old replica removed %v\n",
		ok, v.DigestsMatch, len(v.Replicas), v.KeysExpected, mv.ToNode, v.LeaderMoved, v.SampleFound, v.SampleReads, v.ReadsOnNewNode, mv.ToNode, v.OldReplicaGone)
}
