package benchutil

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// Load is a bulk load of records 0 … Records-1: Writers writers each take the next Batch
// sequential keys (one range, one raft proposal) and write them with WriteMany.
type Load struct {
	Records, Batch, Writers int
	Key                     func(i int) []byte
	// Values makes writer w's value maker (its own random source).
	Values func(w int) func() []byte
	// Progress, if set, is called about once a second with the records written so far.
	Progress func(done int)
}

// loadRetryFor bounds the retries of one batch: overwrites are idempotent, so an ambiguous failure
// (a leadership change on a loaded machine, writes stalled behind compactions on a slow disk) is
// simply retried.
const loadRetryFor = time.Minute

// Run writes every record and returns how many batch writes were retried.
func (l Load) Run(ctx context.Context, cl *client.Client) (retries int64, err error) {
	var next, done, retried atomic.Int64
	var firstErr error
	var once sync.Once
	stop := make(chan struct{})
	defer close(stop)
	if l.Progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					l.Progress(int(done.Load()))
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < l.Writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := l.Values(w)
			for first := int(next.Add(int64(l.Batch))) - l.Batch; first < l.Records; first = int(next.Add(int64(l.Batch))) - l.Batch {
				muts := make([]*pb.Mutation, 0, l.Batch)
				for i := first; i < min(first+l.Batch, l.Records); i++ {
					muts = append(muts, &pb.Mutation{Key: l.Key(i), Value: value()})
				}
				err := cl.WriteMany(ctx, muts)
				for attempt, since := 0, time.Now(); err != nil && ctx.Err() == nil && time.Since(since) < loadRetryFor; attempt++ {
					retried.Add(1)
					time.Sleep(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
					err = cl.WriteMany(ctx, muts)
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("load records %d-%d: %w", first, first+len(muts)-1, err) })
					next.Store(int64(l.Records))
					return
				}
				done.Add(int64(len(muts)))
			}
		}()
	}
	wg.Wait()
	return retried.Load(), firstErr
}
