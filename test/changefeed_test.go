package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// watchLog is what a watch delivered: each key's values in delivery order, and the last cursor.
type watchLog struct {
	mu     sync.Mutex
	dups   map[string]bool  // positions seen (range, index, key): a resumed watch repeats some
	seen   map[string][]int // key → values delivered (a delete is -1)
	cursor string
	events int
}

func (l *watchLog) add(ev client.WatchEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev.Kind {
	case pb.RangeFeedEvent_CHECKPOINT:
		l.cursor = ev.Cursor
		return nil
	}
	pos := fmt.Sprintf("%d/%d/%d", ev.RangeID, ev.Index, ev.Seq)
	if l.dups[pos] {
		return nil
	}
	l.dups[pos] = true
	switch ev.Kind {
	case pb.RangeFeedEvent_PUT:
		n, err := strconv.Atoi(string(ev.Value))
		if err != nil {
			return fmt.Errorf("key %s: value %q", ev.Key, ev.Value)
		}
		l.seen[string(ev.Key)] = append(l.seen[string(ev.Key)], n)
	default:
		l.seen[string(ev.Key)] = append(l.seen[string(ev.Key)], -1)
	}
	l.events++
	return nil
}

// TestWatchDeliversEveryAcknowledgedWriteInOrderUnderChaos writes counters to keys while ranges split,
// merge and move, leaderships change and a node is killed and restarted, and a watch of the span is
// stopped and resumed from its cursor half-way. Every acknowledged write must be delivered at least
// once, and each key's deliveries must never go back in time.
func TestWatchDeliversEveryAcknowledgedWriteInOrderUnderChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 4})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)

	const nKeys, writers = 60, 4
	key := func(i int) string { return fmt.Sprintf("w/k%03d", i) }
	log := &watchLog{seen: map[string][]int{}, dups: map[string]bool{}}
	start, end := []byte("w/"), []byte("w0")

	runWatch := func(wctx context.Context, from string) (<-chan error, <-chan struct{}) {
		done, started := make(chan error, 1), make(chan struct{})
		var once sync.Once
		go func() {
			done <- cl.Watch(wctx, start, end, from, func(ev client.WatchEvent) error {
				once.Do(func() { close(started) })
				return log.add(ev)
			})
		}()
		return done, started
	}
	wctx, wcancel := context.WithCancel(ctx)
	watchDone, started := runWatch(wctx, "")
	select {
	case <-started:
	case err := <-watchDone:
		t.Fatalf("watch: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("watch not established in 30 s")
	}

	// Writers: key i belongs to writer i%writers, which writes 1, 2, 3, … to it.
	acked := make([][]int, nKeys) // each key's acknowledged values (key i written by writer i%writers only)
	stopWriting := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := make([]int, nKeys)
			for i := w; ; i = (i + writers) % nKeys {
				select {
				case <-stopWriting:
					return
				default:
				}
				next[i]++
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				err := cl.Put(pctx, []byte(key(i)), []byte(strconv.Itoa(next[i])))
				pcancel()
				if err == nil {
					acked[i] = append(acked[i], next[i])
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	// Chaos: splits, merges, moves, leader transfers, a kill and a restart, and a resumed watch.
	node0 := c.Nodes[0].Node
	killed := -1
	move := func(sctx context.Context) {
		rs, err := testcluster.RangeOf(sctx, cl, []byte(key(rng.IntN(nKeys))))
		if err != nil {
			return
		}
		d := rs.GetDesc()
		var add, remove uint64
		for i := range c.Nodes {
			id := uint64(i + 1)
			if !hasReplica(d, id) {
				add = id
			} else if id != rs.GetLeaderNodeId() && remove == 0 {
				remove = id
			}
		}
		if add != 0 && remove != 0 {
			resp, err := node0.RelocateReplica(sctx, &pb.RelocateReplicaRequest{RangeId: d.RangeId, AddNodeId: add, RemoveNodeId: remove})
			t.Logf("move r%d n%d→n%d: %v %v", d.RangeId, remove, add, err, resp.GetError())
		}
	}
	transfer := func(sctx context.Context) {
		rs, err := testcluster.RangeOf(sctx, cl, []byte(key(rng.IntN(nKeys))))
		if err != nil {
			return
		}
		for _, rd := range rs.GetDesc().GetReplicas() {
			if rd.NodeId != rs.GetLeaderNodeId() && !rd.Learner && (killed < 0 || int(rd.NodeId) != killed+1) {
				t.Logf("transfer r%d to n%d: %v", rs.GetDesc().RangeId, rd.NodeId, cl.TransferLeader(sctx, rs.GetDesc().RangeId, rd.NodeId))
				return
			}
		}
	}
	steps := []string{"split w/k020", "split w/k040", "transfer", "merge w/k000 w/k040", "move", "split w/k030",
		"transfer", "kill", "transfer", "resume", "move", "restart", "split w/k010", "merge w/k000 w/k020", "move", "transfer"}
	for _, step := range steps {
		time.Sleep(time.Duration(300+rng.IntN(400)) * time.Millisecond)
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		var verb, a, b string
		fmt.Sscan(step, &verb, &a, &b)
		switch verb {
		case "split":
			t.Logf("split at %s: %v", a, splitAt(sctx, cl, []byte(a)))
		case "merge":
			d, err := mergeAt(sctx, cl, []byte(a), []byte(b))
			t.Logf("merge at %s: %v %v", a, d, err)
		case "move":
			if killed < 0 {
				move(sctx)
			}
		case "transfer":
			transfer(sctx)
		case "kill":
			// The leader of a watched range, so that its watchers must move (node 0 stays: the
			// moves go through it).
			killed = 1 + rng.IntN(3)
			if rs, err := testcluster.RangeOf(sctx, cl, []byte(key(rng.IntN(nKeys)))); err == nil && rs.GetLeaderNodeId() > 1 {
				killed = c.NodeIndex(rs.GetLeaderNodeId())
			}
			t.Logf("kill node index %d", killed)
			c.Kill(killed)
		case "restart":
			t.Logf("restart node index %d", killed)
			c.Restart(killed)
			killed = -1
		case "resume":
			log.mu.Lock()
			cur := log.cursor
			log.mu.Unlock()
			wcancel()
			if err := <-watchDone; !errors.Is(err, context.Canceled) {
				t.Fatalf("watch before the resume: %v", err)
			}
			wctx, wcancel = context.WithCancel(ctx)
			watchDone, _ = runWatch(wctx, cur)
			t.Logf("watch resumed from its last cursor")
		}
		scancel()
	}
	if killed >= 0 {
		c.Restart(killed)
	}
	close(stopWriting)
	wg.Wait()

	want := make([]int, nKeys) // each key's last acknowledged value
	for i, vs := range acked {
		if len(vs) > 0 {
			want[i] = vs[len(vs)-1]
		}
	}
	caughtUp := func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		for i, v := range want {
			if vs := log.seen[key(i)]; v > 0 && (len(vs) == 0 || vs[len(vs)-1] < v) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !caughtUp() {
		select {
		case err := <-watchDone:
			t.Fatalf("watch ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wcancel()

	log.mu.Lock()
	defer log.mu.Unlock()
	total := 0
	for i := range want {
		vs := log.seen[key(i)]
		got := map[int]bool{}
		for j, v := range vs {
			if j > 0 && v < vs[j-1] {
				t.Fatalf("key %s: delivered %d after %d (deliveries %v)", key(i), v, vs[j-1], vs)
			}
			got[v] = true
		}
		for _, v := range acked[i] {
			if !got[v] {
				t.Fatalf("key %s: acknowledged value %d never delivered (deliveries %v)", key(i), v, vs)
			}
		}
		total += len(acked[i])
	}
	t.Logf("%d events delivered for %d acknowledged writes over %d keys", log.events, total, nKeys)
	if total == 0 {
		t.Fatal("no write was acknowledged")
	}
}

// TestWatchInitialScanThenChanges watches a span of two ranges with an initial scan: every key
// written before comes first with its value, each once, then a write made after the watch started.
func TestWatchInitialScanThenChanges(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 300
	for i := range n {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("i/%03d", i)), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := splitAt(ctx, cl, []byte("i/150")); err != nil {
		t.Fatal(err)
	}
	initial := map[string]string{}
	established := make(chan struct{})
	var once sync.Once
	got := make(chan client.WatchEvent, 16)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		_ = cl.Watch(wctx, []byte("i/"), []byte("i0"), "", func(ev client.WatchEvent) error {
			switch {
			case ev.Initial:
				select {
				case <-established:
					t.Errorf("initial event %s after the watch was established", ev.Key)
				default:
				}
				if _, dup := initial[string(ev.Key)]; dup {
					t.Errorf("key %s scanned twice", ev.Key)
				}
				initial[string(ev.Key)] = string(ev.Value)
			case ev.Kind == pb.RangeFeedEvent_CHECKPOINT:
				once.Do(func() { close(established) })
			default:
				got <- ev
			}
			return nil
		}, client.WithInitialScan())
	}()
	select {
	case <-established:
	case <-ctx.Done():
		t.Fatal("watch not established")
	}
	if len(initial) != n {
		t.Fatalf("initial scan gave %d keys, want %d", len(initial), n)
	}
	for i := range n {
		if v := initial[fmt.Sprintf("i/%03d", i)]; v != strconv.Itoa(i) {
			t.Fatalf("initial i/%03d = %q", i, v)
		}
	}
	if err := cl.Put(ctx, []byte("i/200"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if ev.Kind != pb.RangeFeedEvent_PUT || string(ev.Key) != "i/200" || string(ev.Value) != "new" || ev.Initial {
			t.Fatalf("change after the scan: %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the write after the scan never arrived")
	}
}
