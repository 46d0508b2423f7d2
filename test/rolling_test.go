package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestRollingRestartThroughPreStop restarts every node of a 3-node cluster in turn, as an
// orchestrator does through the hooks (prestop, SIGTERM, start), while readers and writers run a 95/5
// mix; no request may fail. The leaderships per node over time and each restart's worst 250-ms p99
// are logged, not asserted (wall-clock figures; the compose test in deploy/ measures them).
func TestRollingRestartThroughPreStop(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	for _, at := range []string{"k0300", "k0600", "k0900", "k1200", "k1500"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	for i := range 1800 {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%04d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	type op struct {
		at  time.Time
		dur time.Duration
	}
	var (
		mu     sync.Mutex
		ops    []op
		failed atomic.Int64
		first  atomic.Value
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := []byte(fmt.Sprintf("k%04d", rand.N(1800)))
				start := time.Now()
				var err error
				if rand.N(20) == 0 {
					err = cl.Put(ctx, k, []byte("w"))
				} else {
					_, _, err = cl.Get(ctx, k)
				}
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
				mu.Lock()
				ops = append(ops, op{start, time.Since(start)})
				mu.Unlock()
			}
		})
	}
	t0 := time.Now()
	var events []string
	event := func(s string) { events = append(events, fmt.Sprintf("%6.2fs %s", time.Since(t0).Seconds(), s)) }
	leaders := func() string {
		s := ""
		for i, n := range c.Nodes {
			if c.Alive(i) {
				s += fmt.Sprintf(" n%d:%d", i+1, leaderCount(n.Node))
			} else {
				s += fmt.Sprintf(" n%d:-", i+1)
			}
		}
		return s
	}
	time.Sleep(3 * time.Second)
	stubs := rawStubs(t, c)
	var marks []time.Duration // when each prestop began
	for i := range c.Nodes {
		marks = append(marks, time.Since(t0))
		event("prestop n" + fmt.Sprint(i+1) + leaders())
		resp, err := stubs[i].Maintenance(ctx, &pb.MaintenanceRequest{Task: background.PreStopTask, DurationMs: 20_000})
		if err != nil || resp.GetError() != nil {
			t.Fatalf("prestop: %v %v", err, resp.GetError())
		}
		event("prestop done: " + resp.GetOutcome() + leaders())
		if err := c.StopGracefully(i); err != nil {
			t.Fatal(err)
		}
		event("stopped" + leaders())
		time.Sleep(3 * time.Second)
		c.Restart(i)
		event("restarted" + leaders())
		for range 10 {
			time.Sleep(time.Second)
			event(leaders())
		}
	}
	close(stop)
	wg.Wait()
	for _, e := range events {
		t.Log(e)
	}
	mu.Lock()
	defer mu.Unlock()
	var all []time.Duration
	for _, o := range ops {
		all = append(all, o.dur)
	}
	slices.Sort(all)
	t.Logf("%d requests, %d failed; p99 over the run %v", len(ops), failed.Load(), all[len(all)*99/100])
	// Each restart's worst 250-ms p99 (from its prestop to the next one) against the p99 before the first.
	p99 := func(from, to time.Duration) (worst time.Duration, n int) {
		win := map[int][]time.Duration{}
		for _, o := range ops {
			if at := o.at.Sub(t0); at >= from && at < to {
				win[int(at/(250*time.Millisecond))] = append(win[int(at/(250*time.Millisecond))], o.dur)
			}
		}
		for _, d := range win {
			slices.Sort(d)
			worst, n = max(worst, d[len(d)*99/100]), n+len(d)
		}
		return worst, n
	}
	steady, _ := p99(0, marks[0])
	marks = append(marks, time.Since(t0))
	for i := range c.Nodes {
		w, n := p99(marks[i], marks[i+1])
		t.Logf("n%d restart: %d requests, worst 250-ms p99 %v (steady worst %v)", i+1, n, w, steady)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed across the rolling restart; first: %v", failed.Load(), len(ops), first.Load())
	}
}
