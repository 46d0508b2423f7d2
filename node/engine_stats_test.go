package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
)

// The served block bytes a node reports are its foreground's: a scan job's read loads blocks the
// engine counts (its jobs category) and the report leaves out, so the prefetch plan's disk budget
// and the cache's hit ratio see the clients' reads alone; a client's scan of the same rows counts.
func TestEngineStatsLeaveOutJobReads(t *testing.T) {
	nd := startBootstrapped(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	for i := 0; i < 300; i++ {
		for {
			resp, err := nd.Put(ctx, &pb.PutRequest{Key: key(i), Value: make([]byte, 200)})
			if err == nil && resp.Error == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("put: %v %v", err, resp.GetError())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := nd.Engine().CompactAll(ctx); err != nil {
		t.Fatal(err)
	}
	scan := func(ctx context.Context) {
		t.Helper()
		resp, err := nd.Scan(ctx, &pb.ScanRequest{Start: key(0), End: key(300)})
		if err != nil || resp.Error != nil || len(resp.Kvs) != 300 {
			t.Fatalf("scan: %v %v, %d rows", err, resp.GetError(), len(resp.GetKvs()))
		}
	}
	before, eng := nd.engineStats(), nd.Engine().Stats()
	scan(kv.JobRead(ctx))
	job, engJob := nd.engineStats(), nd.Engine().Stats()
	if engJob.JobBlockBytes <= eng.JobBlockBytes {
		t.Fatalf("a job's scan loaded no block of the jobs' category: %d -> %d", eng.JobBlockBytes, engJob.JobBlockBytes)
	}
	jobs := engJob.JobBlockBytes - eng.JobBlockBytes
	// Raft and the heartbeat may read a little beside the scan: less than the scan's blocks.
	if grew := job.ServedBlockBytes - before.ServedBlockBytes; grew >= jobs {
		t.Fatalf("the report's served bytes grew by %d over a job's scan of %d block bytes: want them left out", grew, jobs)
	}
	scan(ctx)
	if grew := nd.engineStats().ServedBlockBytes - job.ServedBlockBytes; grew < jobs/2 {
		t.Fatalf("a client's scan of the same rows grew the report's served bytes by %d, the job's scan loaded %d", grew, jobs)
	}
}
