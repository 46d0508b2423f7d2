package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/client"
)

// The keys of the workload. Every key starts with a two-digit hex bucket, so that split keys drawn
// from the buckets cut the workload's keys into ranges of similar size:
//
//	<bucket>/c/<k>/e<epoch>      contended key k of an epoch: gets, puts, compare-and-swaps, deletes
//	<bucket>/u/w<worker>/<seq>   unique key: written once, read back later and at the end
//
// Contended keys change name every epoch (Config.Epoch). A write whose outcome is unknown stays
// pending until the end of the history, and porcupine's search grows with the pending writes of a
// key; epochs bound them per key without weakening the check (every key's whole history is checked).
const (
	contendedKeys = 8
	opTimeout     = 8 * time.Second
)

func contendedKey(k, epoch int) string {
	return fmt.Sprintf("%02x/c/%d/e%d", k*256/contendedKeys+3, k, epoch)
}

func uniqueKey(rng *rand.Rand, worker, seq int) string {
	return fmt.Sprintf("%02x/u/w%d/%d", rng.IntN(256), worker, seq)
}

// uniqueWrite is the record of one write of a unique key.
type uniqueWrite struct {
	key, value string
	outcome    history.Outcome
	acked      int64 // History.Now when acknowledged
}

// workload runs the clients and records what they see.
type workload struct {
	h       *history.History
	clients []*client.Client
	epoch   time.Duration
	t0      time.Time
	rng     func(w int) *rand.Rand

	mu      sync.Mutex
	uniques map[string]*uniqueWrite
	acked   []*uniqueWrite // acknowledged unique writes, in order of acknowledgement
	epochs  int            // highest epoch used + 1
	bad     []string       // invalid-argument answers: a test or server bug
	okAt    []int64        // History.Now of every successful operation's return
}

// maxGap returns the longest time between from and to (History.Now values) in which no operation
// succeeded, and when that gap began: how long the cluster was unavailable to the workload.
func (wl *workload) maxGap(from, to int64) (gap time.Duration, at time.Duration) {
	wl.mu.Lock()
	ts := append([]int64(nil), wl.okAt...)
	wl.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	prev := from
	for _, t := range append(ts, to) {
		if t < from || t > to {
			continue
		}
		if d := time.Duration(t - prev); d > gap {
			gap, at = d, time.Duration(prev)
		}
		prev = t
	}
	return gap, at
}

// ackedCount is how many writes of unique keys have been acknowledged so far.
func (wl *workload) ackedCount() int {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return len(wl.acked)
}

func (wl *workload) epochNow() int {
	e := int(time.Since(wl.t0) / wl.epoch)
	wl.mu.Lock()
	wl.epochs = max(wl.epochs, e+1)
	wl.mu.Unlock()
	return e
}

// run runs worker w until stop is closed.
func (wl *workload) run(w int, stop <-chan struct{}) {
	rng := wl.rng(w)
	cl := wl.clients[w%len(wl.clients)]
	cid := w
	seq := 0
	seen := map[string]history.State{} // what this worker last saw of each contended key
	for {
		select {
		case <-stop:
			return
		default:
		}
		seq++
		val := fmt.Sprintf("w%d.%d", w, seq)
		var in history.Input
		var out history.Output
		var err error
		var uw *uniqueWrite
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		p := rng.IntN(100)
		switch {
		case p < 30: // a write of a new unique key, by put or by compare-and-swap from absent
			in = history.Input{Kind: history.Put, Key: uniqueKey(rng, w, seq), Value: val}
			if rng.IntN(4) == 0 {
				in.Kind, in.ExpectAbsent = history.CAS, true
			}
			uw = &uniqueWrite{key: in.Key, value: val}
		case p < 40: // a read of a unique key acknowledged earlier
			wl.mu.Lock()
			if len(wl.acked) > 0 {
				in = history.Input{Kind: history.Get, Key: wl.acked[rng.IntN(len(wl.acked))].key}
			}
			wl.mu.Unlock()
			if in.Key == "" {
				cancel()
				continue
			}
		default:
			k := rng.IntN(contendedKeys)
			in.Key = contendedKey(k, wl.epochNow())
			switch q := rng.IntN(100); {
			case q < 40:
				in.Kind = history.Get
			case q < 65:
				in.Kind, in.Value = history.Put, val
			case q < 93:
				in.Kind, in.Value = history.CAS, val
				guess := seen[in.Key]
				if rng.IntN(5) == 0 { // sometimes a deliberately wrong guess
					guess = history.State{}
					if rng.IntN(2) == 0 {
						guess = history.State{Found: true, Value: fmt.Sprintf("w%d.%d", rng.IntN(len(wl.clients)+4), rng.IntN(seq+1))}
					}
				}
				in.ExpectAbsent, in.Expected = !guess.Found, guess.Value
			default:
				in.Kind = history.Delete
			}
		}
		call := wl.h.Now()
		switch in.Kind {
		case history.Get:
			var v []byte
			v, out.Found, err = cl.Get(ctx, []byte(in.Key))
			out.Value = string(v)
		case history.Put:
			err = cl.Put(ctx, []byte(in.Key), []byte(in.Value))
		case history.CAS:
			var cur []byte
			out.Swapped, cur, out.Found, err = cl.CompareAndSwap(ctx, []byte(in.Key), []byte(in.Expected), in.ExpectAbsent, []byte(in.Value))
			if out.Swapped {
				out.Found = false // found/current are only meaningful when the swap failed
			} else {
				out.Value = string(cur)
			}
		case history.Delete:
			out.Found, err = cl.Delete(ctx, []byte(in.Key))
		}
		ret := wl.h.Now()
		cancel()
		if err == nil {
			wl.mu.Lock()
			wl.okAt = append(wl.okAt, ret)
			wl.mu.Unlock()
			switch {
			case in.Kind == history.Get:
				seen[in.Key] = history.State{Found: out.Found, Value: out.Value}
			case in.Kind == history.Put, in.Kind == history.CAS && out.Swapped:
				seen[in.Key] = history.State{Found: true, Value: in.Value}
			case in.Kind == history.CAS:
				seen[in.Key] = history.State{Found: out.Found, Value: out.Value}
			case in.Kind == history.Delete:
				seen[in.Key] = history.State{}
			}
		}
		if uw != nil {
			uw.outcome = history.Classify(err)
			if uw.outcome == history.OutOK && in.Kind == history.CAS && !out.Swapped {
				// Absent was expected of a key nobody else writes: not swapping is a violation, which
				// the history shows; the write itself did not happen.
				uw.outcome = history.OutDefinite
			}
			wl.mu.Lock()
			wl.uniques[uw.key] = uw
			if uw.outcome == history.OutOK {
				uw.acked = ret
				wl.acked = append(wl.acked, uw)
			}
			wl.mu.Unlock()
		}
		pending, bad := wl.h.Add(cid, in, out, call, ret, err)
		if bad != nil {
			wl.mu.Lock()
			wl.bad = append(wl.bad, fmt.Sprintf("worker %d: %v", w, bad))
			wl.mu.Unlock()
		}
		if pending {
			cid = wl.h.NewClientID()
		}
	}
}

// finalCheck is the result of the final read of every key.
type finalCheck struct {
	acked, unknown, definite int
	lost                     []string // acknowledged unique writes not found with their value
	phantom                  []string // unique writes that definitely failed but are present
	corrupt                  []string // unique keys holding a value nobody wrote
	scanMissed               []string // keys a scan did not return that a get found
}

// finalRead reads every key of the workload back with cl and records the reads in the history: the
// contended keys with Get, the unique keys with a Scan over the whole key space (each key's read is
// linearizable within the scan, so it is recorded as a Get over the scan's interval) and, for a unique
// key the scan did not show with its value, a Get.
func (wl *workload) finalRead(ctx context.Context, cl *client.Client) (finalCheck, error) {
	var fc finalCheck
	cid := wl.h.NewClientID()
	wl.mu.Lock()
	epochs := wl.epochs
	uniques := make([]*uniqueWrite, 0, len(wl.uniques))
	written := make(map[string]bool, len(wl.uniques))
	for _, u := range wl.uniques {
		uniques = append(uniques, u)
		written[u.key] = true
	}
	wl.mu.Unlock()
	sort.Slice(uniques, func(i, j int) bool { return uniques[i].key < uniques[j].key })

	get := func(key string) (history.Output, error) {
		for attempt := 0; ; attempt++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			call := wl.h.Now()
			v, found, err := cl.Get(rctx, []byte(key))
			ret := wl.h.Now()
			cancel()
			if err == nil {
				out := history.Output{Found: found, Value: string(v)}
				wl.h.Add(cid, history.Input{Kind: history.Get, Key: key}, out, call, ret, nil)
				return out, nil
			}
			if attempt >= 5 || ctx.Err() != nil {
				return history.Output{}, fmt.Errorf("final read of %s: %w", key, err)
			}
		}
	}
	for e := 0; e < epochs; e++ {
		for k := 0; k < contendedKeys; k++ {
			if _, err := get(contendedKey(k, e)); err != nil {
				return fc, err
			}
		}
	}

	// Scan the whole user key space in pages.
	found := map[string]string{}
	var start []byte
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		call := wl.h.Now()
		kvs, err := cl.Scan(sctx, start, nil, 2000, false)
		ret := wl.h.Now()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return fc, fmt.Errorf("final scan: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
			continue // a scan is a read: retrying it is safe
		}
		for _, kv := range kvs {
			k := string(kv.Key)
			if strings.Contains(k, "/u/") {
				found[k] = string(kv.Value)
				if written[k] {
					wl.h.Add(cid, history.Input{Kind: history.Get, Key: k}, history.Output{Found: true, Value: string(kv.Value)}, call, ret, nil)
				}
			}
		}
		if len(kvs) < 2000 {
			break
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}

	for k, v := range found {
		if !written[k] {
			fc.corrupt = append(fc.corrupt, fmt.Sprintf("%s = %q was never written", k, v))
		}
	}
	for _, u := range uniques {
		switch u.outcome {
		case history.OutOK:
			fc.acked++
		case history.OutUnknown:
			fc.unknown++
		default:
			fc.definite++
		}
		v, inScan := found[u.key]
		if !inScan || v != u.value {
			// Not in the scan, or not with the value written: ask again with a get (recorded too).
			out, err := get(u.key)
			if err != nil {
				return fc, err
			}
			if out.Found && (!inScan || v != out.Value) {
				fc.scanMissed = append(fc.scanMissed, fmt.Sprintf("%s: scan %q (present %v), get %q", u.key, v, inScan, out.Value))
			}
			inScan, v = out.Found, out.Value
		}
		switch {
		case inScan && v != u.value:
			fc.corrupt = append(fc.corrupt, fmt.Sprintf("%s = %q, written %q (%s)", u.key, v, u.value, outcomeName(u.outcome)))
		case !inScan && u.outcome == history.OutOK:
			fc.lost = append(fc.lost, fmt.Sprintf("%s = %q acknowledged at %.3fs", u.key, u.value, time.Duration(u.acked).Seconds()))
		case inScan && (u.outcome == history.OutDefinite || u.outcome == history.OutInvalid):
			fc.phantom = append(fc.phantom, fmt.Sprintf("%s = %q after a definite failure", u.key, v))
		}
	}
	return fc, nil
}

func outcomeName(o history.Outcome) string {
	return [...]string{"acknowledged", "definitely failed", "unknown outcome", "invalid"}[o]
}
