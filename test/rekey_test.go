package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/rekey"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestRekeyUnderWritesRefusesNothingAndLosesNothing changes a table's primary key from id to
// (city, id) while writers keep moving rows between cities and reading back what they wrote. No
// write or read fails, every read sees the write before it, and afterwards the table holds every
// row once, with its last acknowledged value, in (city, id) order; the old keyspace is retired.
func TestRekeyUnderWritesRefusesNothingAndLosesNothing(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)

	cat := table.NewCatalog(cl)
	cols, err := table.ParseColumns("id:int64,name:string,city:string")
	if err != nil {
		t.Fatal(err)
	}
	d, err := cat.Create(ctx, table.NewDescriptor("users", cols, table.ParseKeyList("id")))
	if err != nil {
		t.Fatal(err)
	}
	cities := []string{"oslo", "rome", "lima", "kyiv", "pune", "baku", "nice", "bern"}
	const nRows, writers = 1200, 4
	last := make([]table.Row, nRows) // each row's last acknowledged value (row i written by writer i%writers)
	setup, _ := cat.Open(ctx, "users")
	for i := range nRows {
		row := table.Row{"id": int64(i), "name": fmt.Sprintf("n%d.0", i), "city": cities[i%len(cities)]}
		if err := setup.Put(ctx, row); err != nil {
			t.Fatal(err)
		}
		last[i] = row
	}
	ostart, oend := table.TableSpan(d.ID)
	if err := splitAt(ctx, cl, append(append([]byte(nil), ostart...), 0x80)); err != nil { // two ranges: a split under the copy
		t.Fatal(err)
	}

	var failed atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	var writes, reads atomic.Int64
	var moving atomic.Bool
	moving.Store(true)
	var inFlight sync.RWMutex // writers hold it shared around a write; the re-key's callback takes it to stop moves
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := cat.Open(ctx, "users") // opened before the re-key: it must follow the cutover
			if err != nil {
				fail(err)
				return
			}
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := w + writers*rng.IntN(nRows/writers)
				city := last[i]["city"]
				if moving.Load() {
					// Until the copy has caught up, rows also change city: the copy must move them
					// under the new key. Later, a city change would be a new row under (city, id).
					city = cities[rng.IntN(len(cities))]
				}
				row := table.Row{"id": int64(i), "name": fmt.Sprintf("n%d.%d", i, n), "city": city}
				inFlight.RLock()
				err := tb.Put(ctx, row)
				inFlight.RUnlock()
				if err != nil {
					fail(fmt.Errorf("put %v: %w", row, err))
					return
				}
				last[i] = row
				writes.Add(1)
				got, found, err := tb.GetRow(ctx, row)
				if err != nil || !found || got["name"] != row["name"] {
					fail(fmt.Errorf("read back %v: %v %v %v", row, got, found, err))
					return
				}
				reads.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	var phases []string
	res, err := rekey.Run(ctx, cl, "users", rekey.Options{PrimaryKey: []string{"city", "id"}, Progress: func(p rekey.Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
		if p.Phase != "placement" && p.Phase != "copy" && moving.Load() {
			inFlight.Lock() // no city change is in flight when the fence can come
			moving.Store(false)
			inFlight.Unlock()
		}
	}})
	if err != nil {
		t.Fatalf("rekey: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // writers go on under the new key
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d writer failures; first: %v", n, firstErr.Load())
	}
	t.Logf("re-key: %d rows copied, %d changes followed, writes held %v, cut over at %v, %d old rows deleted, total %v; phases %v; %d writes and %d reads by the writers",
		res.Rows, res.Changes, res.FenceHeld.Round(time.Millisecond), res.CutoverAt.Round(time.Millisecond), res.Cleaned, res.Total.Round(time.Millisecond), phases, writes.Load(), reads.Load())

	checkPlacement(ctx, t, cl, res.Placement, nRows)
	nd, err := cat.Describe(ctx, "users")
	if err != nil || nd.ID != res.NewID || fmt.Sprint(nd.PrimaryKey) != "[city id]" || nd.Rekey != nil || len(nd.RetiredIDs) != 0 {
		t.Fatalf("descriptor after the re-key: %+v %v", nd, err)
	}
	tb, _ := cat.Open(ctx, "users")
	var got []table.Row
	if err := tb.Scan(ctx, 0, func(r table.Row) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != nRows {
		t.Fatalf("%d rows after the re-key, want %d", len(got), nRows)
	}
	if !sort.SliceIsSorted(got, func(a, b int) bool {
		ca, cb := got[a]["city"].(string), got[b]["city"].(string)
		return ca < cb || ca == cb && got[a]["id"].(int64) < got[b]["id"].(int64)
	}) {
		t.Fatal("rows are not in (city, id) order")
	}
	for _, r := range got {
		want := last[r["id"].(int64)]
		if r["name"] != want["name"] || r["city"] != want["city"] {
			t.Fatalf("row %v, last acknowledged %v", r, want)
		}
	}
	if _, err := cl.Scan(ctx, ostart, oend, 1, false); !errors.Is(err, client.ErrSpanRetired) {
		t.Fatalf("a read of the old keyspace: %v, want ErrSpanRetired", err)
	}
}

// TestRekeyLinearizableAcrossTheCutover records concurrent reads and writes of a few rows from
// several table clients while the table is re-keyed, and checks the history with porcupine: no
// stale read and no lost write across the copy, the fence and the cutover.
func TestRekeyLinearizableAcrossTheCutover(t *testing.T) {
	const nRows, nClients = 5, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, cat := heldTableCluster(ctx, t, "lin", "id:int64,name:string,city:string")
	city := func(id int64) string { return fmt.Sprintf("c%d", id%3) } // a row never changes city
	key := func(id int64) string { return fmt.Sprintf("row%d", id) }
	h := history.New(nClients + 1)
	setup, _ := cat.Open(ctx, "lin")
	for id := range int64(nRows) {
		call := h.Now()
		err := setup.Put(ctx, table.Row{"id": id, "name": "init", "city": city(id)})
		if _, bad := h.Add(nClients, history.Input{Kind: history.Put, Key: key(id), Value: "init"}, history.Output{}, call, h.Now(), err); err != nil || bad != nil {
			t.Fatal(err, bad)
		}
	}
	// The clients run until a second after the re-key returned (placement, copy, fence, cutover).
	var done atomic.Bool
	var wg sync.WaitGroup
	var badMu sync.Mutex
	var bad []error
	for w := range nClients {
		wg.Go(func() {
			tb, err := cat.Open(ctx, "lin")
			if err != nil {
				badMu.Lock()
				bad = append(bad, err)
				badMu.Unlock()
				return
			}
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			cid := w
			for seq := 0; !done.Load(); seq++ {
				id := rng.Int64N(nRows)
				in := history.Input{Key: key(id)}
				var out history.Output
				octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
				call := h.Now()
				if rng.IntN(2) == 0 {
					in.Kind = history.Get
					var row table.Row
					row, out.Found, err = tb.GetRow(octx, table.Row{"id": id, "city": city(id)})
					if out.Found {
						out.Value = row["name"].(string)
					}
				} else {
					in.Kind, in.Value = history.Put, fmt.Sprintf("w%d.%d", w, seq)
					err = tb.Put(octx, table.Row{"id": id, "name": in.Value, "city": city(id)})
				}
				ret := h.Now()
				ocancel()
				pending, berr := h.Add(cid, in, out, call, ret, err)
				if berr != nil {
					badMu.Lock()
					bad = append(bad, berr)
					badMu.Unlock()
					return
				}
				if pending {
					cid = h.NewClientID()
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	res, err := rekey.Run(ctx, cl, "lin", rekey.Options{PrimaryKey: []string{"city", "id"}})
	time.Sleep(time.Second)
	done.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("rekey: %v", err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	tb, _ := cat.Open(ctx, "lin")
	fin := h.NewClientID()
	for id := range int64(nRows) {
		call := h.Now()
		row, found, err := tb.GetRow(ctx, table.Row{"id": id, "city": city(id)})
		var out history.Output
		if found {
			out = history.Output{Found: true, Value: row["name"].(string)}
		}
		h.Add(fin, history.Input{Kind: history.Get, Key: key(id)}, out, call, h.Now(), err)
	}
	ops := h.Finish()
	t.Logf("re-key held writes %v; %v", res.FenceHeld.Round(time.Millisecond), h.Counts())
	checkLinearizable(t, ops, 60*time.Second)
}

// TestRekeyToANonUniqueKeyFailsAndCancels: a new key two rows share stops the re-key with an error
// (no row merged into another), and cancelling it leaves the table as it was.
func TestRekeyToANonUniqueKeyFailsAndCancels(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	cat := table.NewCatalog(cl)
	cols, _ := table.ParseColumns("id:int64,city:string")
	if _, err := cat.Create(ctx, table.NewDescriptor("dup", cols, table.ParseKeyList("id"))); err != nil {
		t.Fatal(err)
	}
	tb, _ := cat.Open(ctx, "dup")
	for id, city := range []string{"oslo", "rome", "oslo"} {
		if err := tb.Put(ctx, table.Row{"id": int64(id), "city": city}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rekey.Run(ctx, cl, "dup", rekey.Options{PrimaryKey: []string{"city"}}); err == nil || !strings.Contains(err.Error(), "not unique") {
		t.Fatalf("re-key to a shared key: %v, want an error saying it is not unique", err)
	}
	if err := rekey.Cancel(ctx, cl, "dup"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	d, err := cat.Describe(ctx, "dup")
	if err != nil || d.Rekey != nil || fmt.Sprint(d.PrimaryKey) != "[id]" {
		t.Fatalf("after the cancel: %+v %v", d, err)
	}
	n := 0
	if err := tb.Scan(ctx, 0, func(table.Row) bool { n++; return true }); err != nil || n != 3 {
		t.Fatalf("after the cancel: %d rows, %v", n, err)
	}
	if err := tb.Put(ctx, table.Row{"id": int64(9), "city": "lima"}); err != nil {
		t.Fatalf("a write after the cancel: %v", err)
	}
}

// TestRekeyWhileANodeDrains re-keys a table while a node drains: the placement plans no leadership
// on the draining node (the autopilot would refuse it), the drain goes on meanwhile, and at the end
// the node leads none of the table's new ranges and every row is there under the new key.
func TestRekeyWhileANodeDrains(t *testing.T) {
	const nRows = 900
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, cat := heldTableCluster(ctx, t, "drained", "id:int64,city:string")
	tb, _ := cat.Open(ctx, "drained")
	for id := range int64(nRows) {
		if err := tb.Put(ctx, table.Row{"id": id, "city": fmt.Sprintf("c%d", id%7)}); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	drained := nodes[2].GetDesc().GetNodeId()
	if err := cl.SetNodeState(ctx, drained, pb.NodeAdminState_NODE_DRAINING); err != nil {
		t.Fatal(err)
	}
	var recorded *table.RekeyState // the progress rekey-status would show, read once the copy ended
	res, err := rekey.Run(ctx, cl, "drained", rekey.Options{PrimaryKey: []string{"city", "id"}, Progress: func(p rekey.Progress) {
		if p.Phase == "catch-up" && recorded == nil {
			if d, err := cat.Describe(ctx, "drained"); err == nil {
				recorded = d.Rekey
			}
		}
	}})
	if err != nil {
		t.Fatalf("rekey: %v", err)
	}
	if recorded == nil || recorded.Phase != "catch-up" || recorded.Rows != nRows || recorded.UpdatedUnixMs == 0 {
		t.Fatalf("progress recorded in the descriptor at the catch-up: %+v, want phase catch-up and %d rows", recorded, nRows)
	}
	p := res.Placement
	if p == nil || p.NewRanges < 2 || p.Refused != 0 {
		t.Fatalf("placement %+v: want new ranges, none refused", p)
	}
	for r, n := range p.Leaders {
		if n == drained {
			t.Fatalf("the plan leads r%d from the draining node n%d", r, n)
		}
	}
	nstart, nend := table.TableSpan(res.NewID)
	testcluster.WaitFor(t, 60*time.Second, "the draining node leads none of the new ranges", func() bool {
		all, err := cl.Ranges(ctx)
		if err != nil {
			return false
		}
		for _, rs := range all {
			d := rs.GetDesc()
			if bytes.Compare(d.GetStartKey(), nend) < 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(d.GetEndKey(), nstart) > 0) &&
				d.GetRangeId() != 1 && rs.GetLeaderNodeId() == drained {
				return false
			}
		}
		return true
	})
	tb, _ = cat.Open(ctx, "drained")
	n := 0
	if err := tb.Scan(ctx, 0, func(table.Row) bool { n++; return true }); err != nil || n != nRows {
		t.Fatalf("after the re-key: %d rows, %v", n, err)
	}
	t.Logf("re-key with n%d draining: %d new ranges led by %v, writes held %v, cut over at %v",
		drained, p.NewRanges, p.Leaders, res.FenceHeld.Round(time.Millisecond), res.CutoverAt.Round(time.Millisecond))
}

// heldTableCluster starts three nodes, waits for three voters on every range, holds the autopilot's
// load-driven policies, and creates table name of columns cols keyed by id.
func heldTableCluster(ctx context.Context, t *testing.T, name, cols string) (*client.Client, *table.Catalog) {
	t.Helper()
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)
	cat := table.NewCatalog(cl)
	cs, err := table.ParseColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Create(ctx, table.NewDescriptor(name, cs, table.ParseKeyList("id"))); err != nil {
		t.Fatal(err)
	}
	return cl, cat
}

// checkPlacement checks a re-key's placement of its new keyspace: one new range per old range (at
// least one per node), the table's rows estimated within 2×, Greedy ≤ Balanced ≤ Random in
// predicted bytes (each optimal in its class),
// every planned leadership queued or in place, and each queued one in the decision log.
func checkPlacement(ctx context.Context, t *testing.T, cl *client.Client, p *rekey.PlacementReport, rows int) {
	t.Helper()
	if p == nil {
		t.Fatal("no placement report")
	}
	t.Logf("placement: %d new ranges from %d sampled rows (%.0f bytes), predicted bytes moved %v; %d leaderships queued, %d in place, %d refused, %d placed at the copy's start, in %v",
		p.NewRanges, p.SampledRows, p.TableBytes, p.Predicted, p.Submitted, p.InPlace, p.Refused, p.Placed, p.Took.Round(time.Millisecond))
	if p.NewRanges < 3 || len(p.Leaders) != p.NewRanges || p.SampledRows == 0 {
		t.Fatalf("placement %+v: want at least 3 new ranges, each planned", p)
	}
	if p.EstimatedRows < int64(rows)/2 || p.EstimatedRows > 2*int64(rows) {
		t.Fatalf("placement estimated %d rows, the table holds %d", p.EstimatedRows, rows)
	}
	if g, b, r := p.Predicted[rekey.PlaceGreedy], p.Predicted[rekey.PlaceBalanced], p.Predicted[rekey.PlaceRandom]; g > b+1e-6 || b > r+1e-6 {
		t.Fatalf("predicted bytes moved greedy %.0f, balanced %.0f, random %.0f: want greedy ≤ balanced ≤ random", g, b, r)
	}
	if p.Refused != 0 || p.Submitted+p.InPlace != len(p.Leaders) {
		t.Fatalf("placement %+v: every leadership should be queued or in place", p)
	}
	ds, _, err := cl.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logged := 0
	for _, d := range ds {
		if d.Policy == rekey.PolicyName && strings.Contains(d.Reason, "placement of") {
			logged++
		}
	}
	if logged < p.Submitted {
		t.Fatalf("%d re-key operators in the decision log, %d queued", logged, p.Submitted)
	}
}
