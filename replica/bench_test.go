package replica

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// BenchmarkProposeOneNode measures the CPU and allocations of one write through a one-voter range:
// propose, the raft loop, the log batch, apply and the answer. The engine is in memory, so fsyncs
// cost nothing and the figure is the write path's own work. Run it with -cpu to vary the writers'
// parallelism (RunParallel starts GOMAXPROCS×8 of them).
func BenchmarkProposeOneNode(b *testing.B) {
	eng, err := storage.Open(b.TempDir(), storage.Options{CreateIfMissing: true, FS: vfs.NewMem(), CacheBytes: 8 << 20, MemTableBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	cfg := Config{NodeID: 1, Engine: eng, Transport: &fakeTransport{}, TickInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := NewStore(cfg).Bootstrap(&pb.RangeDescriptor{RangeId: FirstUserRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}, nil); err != nil {
		b.Fatal(err)
	}
	s := NewStore(cfg)
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	r := s.Replica(FirstUserRangeID)
	for !r.IsLeader() {
		r.Campaign()
		time.Sleep(time.Millisecond)
	}
	value := make([]byte, 100)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	c0, e0 := s.LoopStats().Cycles, s.LoopStats().EntriesWritten
	defer func() {
		ls := s.LoopStats()
		if n := ls.EntriesWritten - e0; n > 0 {
			b.ReportMetric(float64(ls.Cycles-c0)/float64(n), "cycles/entry")
		}
	}()
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			k := strconv.AppendInt([]byte("k"), seq.Add(1), 10)
			cmd := &pb.Command{Mutations: []*pb.Mutation{{Key: k, Value: value}}}
			if _, err := r.Propose(context.Background(), cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
