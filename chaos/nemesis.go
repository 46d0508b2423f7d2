package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/chaos/netfault"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// The nemesis's actions. Faults are undone later (a kill by a restart, a pause by SIGCONT, a
// partition by healing it); splits, merges and leadership transfers are requests to the cluster that
// may be refused (counted as "<action> refused").
const (
	ActKill                  = "kill"                    // kill -9 a node; restart it 1–4 s later
	ActPause                 = "pause"                   // SIGSTOP a node; SIGCONT it 0.3–4 s later
	ActRestart               = "restart"                 // SIGTERM a node and start it again at once
	ActPartitionHalves       = "partition-halves"        // cut a random minority from the majority
	ActPartitionLeader       = "partition-leader"        // cut a range's leader from the other nodes; clients still reach it
	ActPartitionLeaderClient = "partition-leader-client" // the same, and cut it from the clients too
	ActPartitionLink         = "partition-link"          // cut one node-to-node link (a non-transitive partition)
	ActSplit                 = "split"                   // split at a random key
	ActMerge                 = "merge"                   // merge a random user range with its right neighbour
	ActTransfer              = "transfer-leader"         // move a random range's leadership to another voter
)

// AllActions lists every action of the nemesis with its relative weight.
var AllActions = map[string]int{
	ActKill: 3, ActPause: 3, ActRestart: 1,
	ActPartitionHalves: 1, ActPartitionLeader: 1, ActPartitionLeaderClient: 1, ActPartitionLink: 1,
	ActSplit: 2, ActMerge: 2, ActTransfer: 2,
}

// undo is a fault to end at a time.
type undo struct {
	at   time.Time
	what string
	fn   func() error
}

// nemesis disturbs the cluster of a run at random, from its own random source. Its loop is the only
// goroutine that touches its fields; the actions that wait for the cluster (splits, merges,
// transfers, graceful restarts) run in a goroutine of their own, one at a time, and report back
// through done, so that faults are always ended on time.
type nemesis struct {
	r       *run
	rng     *rand.Rand
	actions []string // enabled, sorted (for a deterministic choice from the seed)
	weights map[string]int
	undos   []undo
	cover   []string     // actions not done yet, to do first (in this order)
	parted  bool         // a partition is in force
	busy    int          // index+1 of the node a graceful restart is working on (0: none)
	running bool         // an asynchronous action is in flight
	done    chan actDone // its result
	counts  map[string]int
}

// actDone is the result of an asynchronous action.
type actDone struct {
	action string
	err    error
}

func newNemesis(r *run, rng *rand.Rand, enabled map[string]int) *nemesis {
	nm := &nemesis{r: r, rng: rng, weights: enabled, counts: map[string]int{}, done: make(chan actDone, 1)}
	for a := range enabled {
		nm.actions = append(nm.actions, a)
	}
	sort.Strings(nm.actions)
	nm.cover = slices.Clone(nm.actions)
	rng.Shuffle(len(nm.cover), func(i, j int) { nm.cover[i], nm.cover[j] = nm.cover[j], nm.cover[i] })
	return nm
}

// impaired counts the nodes that are down, paused or being restarted.
func (nm *nemesis) impaired() int {
	c := 0
	for i, n := range nm.r.nodes {
		if n.getState() != nodeRunning || nm.busy == i+1 {
			c++
		}
	}
	return c
}

// maxImpaired is how many nodes may be down or paused at once: a majority stays up.
func (nm *nemesis) maxImpaired() int { return (len(nm.r.nodes) - 1) / 2 }

// loop acts until deadline, then ends every fault it caused. An action kind not yet covered at the
// deadline (the cover waits for each kind to be possible: a partition for the one before to heal, a
// split for no other action in flight), or too few acknowledged writes (acked says how many and
// whether they are enough), extends the run until both are done, by at most the run's length again:
// a short run that missed a kind, or wrote little, would have tested less than it says.
func (nm *nemesis) loop(ctx context.Context, deadline time.Time, acked func() (int, bool)) {
	hard := deadline.Add(time.Until(deadline))
	extended := false
	next := time.Now().Add(nm.interval())
	// slow logs a step of the loop that held it up (a fault would then end late).
	slow := func(what string, since time.Time) {
		if d := time.Since(since); d > time.Second {
			nm.r.logf("nemesis: %s held the loop up for %.1fs", what, d.Seconds())
		}
	}
	// A watchdog dumps every goroutine's stack once if the loop makes no progress for 5 s: a fault
	// that ends late is a bug of the driver, and the stacks say where it waited.
	var beat atomic.Int64
	beat.Store(time.Now().UnixNano())
	stopDog := make(chan struct{})
	defer close(stopDog)
	go func() {
		dumped := false
		for {
			select {
			case <-stopDog:
				return
			case <-time.After(time.Second):
			}
			if stale := time.Since(time.Unix(0, beat.Load())); stale > 5*time.Second && !dumped {
				dumped = true
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 2)
				nm.r.logf("nemesis: the loop has made no progress for %.1fs; goroutines:\n%s", stale.Seconds(), b.String())
			}
		}
	}()
	for {
		beat.Store(time.Now().UnixNano())
		now := time.Now()
		nm.runDue(now)
		t := time.Now()
		nm.collect(false)
		nm.r.checkCrashes()
		slow("checking for crashes", t)
		if ctx.Err() != nil || now.After(hard) {
			break
		}
		if now.After(deadline) {
			n, enough := acked()
			if len(nm.cover) == 0 && enough {
				break
			}
			if !extended {
				extended = true
				var missing []string
				if len(nm.cover) > 0 {
					missing = append(missing, fmt.Sprintf("actions %v not done yet", nm.cover))
				}
				if !enough {
					missing = append(missing, fmt.Sprintf("only %d acknowledged writes", n))
				}
				nm.r.logf("nemesis: %s at the end of the run: going on, at most until %.1fs",
					strings.Join(missing, " and "), hard.Sub(nm.r.t0).Seconds())
			}
		}
		if !now.Before(next) {
			t := time.Now()
			a := nm.act()
			slow(a, t)
			next = time.Now().Add(nm.interval())
		}
		wake := next
		if deadline.Before(wake) && !extended {
			wake = deadline
		}
		for _, u := range nm.undos {
			if u.at.Before(wake) {
				wake = u.at
			}
		}
		if d := time.Until(wake); d > 0 {
			select {
			case <-time.After(min(d, 100*time.Millisecond)):
			case <-ctx.Done():
			}
		}
	}
	nm.collect(true)
	nm.runDue(time.Now().Add(time.Hour)) // everything, now
}

// collect records the result of the asynchronous action, waiting for it if wait.
func (nm *nemesis) collect(wait bool) {
	if !nm.running {
		return
	}
	var d actDone
	if wait {
		d = <-nm.done
	} else {
		select {
		case d = <-nm.done:
		default:
			return
		}
	}
	nm.running, nm.busy = false, 0
	nm.record(d.action, d.err)
}

// record counts an action's outcome.
func (nm *nemesis) record(a string, err error) {
	var refused refusedError
	switch {
	case errors.As(err, &refused):
		nm.counts[a+" refused"]++
		nm.r.logf("nemesis: %s refused: %v", a, refused.err)
	case err != nil:
		nm.counts[a+" failed"]++
		nm.r.problem("nemesis: %s: %v", a, err)
	default:
		nm.counts[a]++
	}
}

func (nm *nemesis) interval() time.Duration {
	lo, hi := nm.r.cfg.MinInterval, nm.r.cfg.MaxInterval
	return lo + time.Duration(nm.rng.Int64N(int64(hi-lo)+1))
}

// runDue ends the faults due by now.
func (nm *nemesis) runDue(now time.Time) {
	sort.SliceStable(nm.undos, func(i, j int) bool { return nm.undos[i].at.Before(nm.undos[j].at) })
	for len(nm.undos) > 0 && !nm.undos[0].at.After(now) {
		u := nm.undos[0]
		nm.undos = nm.undos[1:]
		late := time.Since(u.at)
		if err := u.fn(); err != nil {
			nm.r.problem("nemesis: %s: %v", u.what, err)
		} else if late > time.Second {
			nm.r.logf("nemesis: %s (%.1fs late)", u.what, late.Seconds())
		} else {
			nm.r.logf("nemesis: %s", u.what)
		}
	}
}

func (nm *nemesis) later(lo, hi time.Duration, what string, fn func() error) time.Duration {
	d := lo + time.Duration(nm.rng.Int64N(int64(hi-lo)+1))
	nm.undos = append(nm.undos, undo{at: time.Now().Add(d), what: what, fn: fn})
	return d
}

// act performs one action chosen at random among those possible now and returns its name.
func (nm *nemesis) act() string {
	canFault := nm.impaired() < nm.maxImpaired()
	var choices []string
	total := 0
	for _, a := range nm.actions {
		switch a {
		case ActKill, ActPause:
			if !canFault {
				continue
			}
		case ActRestart:
			if !canFault || nm.running {
				continue
			}
		case ActSplit, ActMerge, ActTransfer:
			if nm.running {
				continue
			}
		case ActPartitionHalves, ActPartitionLeader, ActPartitionLeaderClient, ActPartitionLink:
			if nm.parted || len(nm.r.nodes) < 2 {
				continue
			}
		}
		choices = append(choices, a)
		total += nm.weights[a]
	}
	if total == 0 {
		return "choosing no action"
	}
	var a string
	fromCover := false
	// First every enabled action once, in a random order (skipping those not possible now), so that
	// even a short run exercises each kind of fault; then at random by weight.
	for i, c := range nm.cover {
		if slices.Contains(choices, c) {
			a, fromCover = c, true
			nm.cover = slices.Delete(nm.cover, i, i+1)
			break
		}
	}
	if a == "" && len(nm.cover) > 0 {
		return "waiting to cover an action" // until the next action to cover is possible
	}
	if a == "" {
		pick := nm.rng.IntN(total)
		for _, c := range choices {
			if pick < nm.weights[c] {
				a = c
				break
			}
			pick -= nm.weights[c]
		}
	}
	var async func() error
	// finish records a synchronous action; if the cluster refused it while it was being covered,
	// it is tried again after the other actions to cover.
	finish := func(err error) {
		var refused refusedError
		if errors.As(err, &refused) && fromCover {
			nm.cover = append(nm.cover, a)
		}
		nm.record(a, err)
	}
	switch a {
	case ActKill:
		finish(nm.kill())
	case ActPause:
		finish(nm.pause())
	case ActPartitionHalves, ActPartitionLeader, ActPartitionLeaderClient, ActPartitionLink:
		finish(nm.partition(a))
	case ActRestart:
		n := nm.target()
		if n == nil {
			return a
		}
		nm.busy = n.idx + 1
		async = func() error { return nm.restart(n) }
	case ActSplit:
		async = nm.split(nm.splitKey())
	case ActMerge:
		async = nm.merge()
	case ActTransfer:
		async = nm.transfer()
	}
	if async != nil {
		nm.running = true
		go func() { nm.done <- actDone{a, async()} }()
	}
	return a
}

// refusedError is a request the cluster declined or could not serve under the current faults: part
// of chaos, not a failure of the run.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }

// target picks the node to fault: half of the time the leader of a user range, else any node; only
// running nodes.
func (nm *nemesis) target() *node {
	if nm.rng.IntN(2) == 0 {
		if idx, _, ok := nm.leaderOfUserRange(); ok && nm.r.nodes[idx].getState() == nodeRunning && nm.busy != idx+1 {
			return nm.r.nodes[idx]
		}
	}
	var up []*node
	for i, n := range nm.r.nodes {
		if n.getState() == nodeRunning && nm.busy != i+1 {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[nm.rng.IntN(len(up))]
}

// ranges asks the cluster for its ranges, for at most d (the loop calls it too: it must not hold up
// the end of a fault for long).
func (nm *nemesis) ranges(d time.Duration) ([]*pb.RangeStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return nm.r.admin.Ranges(ctx)
}

// leaderOfUserRange returns the index of the node leading a random user range and that range.
func (nm *nemesis) leaderOfUserRange() (int, *pb.RangeStatus, bool) {
	rs, err := nm.ranges(1500 * time.Millisecond)
	if err != nil {
		return 0, nil, false
	}
	var led []*pb.RangeStatus
	for _, r := range rs {
		if r.GetDesc().GetRangeId() != metaRangeID && r.GetLeaderNodeId() != 0 {
			led = append(led, r)
		}
	}
	if len(led) == 0 {
		return 0, nil, false
	}
	r := led[nm.rng.IntN(len(led))]
	idx := nm.r.indexOf(r.GetLeaderNodeId())
	return idx, r, idx >= 0
}

func (nm *nemesis) kill() error {
	n := nm.target()
	if n == nil {
		return refusedError{errors.New("no running node")}
	}
	if err := n.kill(); err != nil {
		return err
	}
	d := nm.later(time.Second, 4*time.Second, "restart "+n.name()+" (after kill -9)", func() error { return n.start(nm.r.cfg.StartTimeout) })
	nm.r.logf("nemesis: kill -9 %s (back in %.1fs)", n.name(), d.Seconds())
	return nil
}

func (nm *nemesis) pause() error {
	n := nm.target()
	if n == nil {
		return refusedError{errors.New("no running node")}
	}
	if err := n.pause(); err != nil {
		return err
	}
	d := nm.later(300*time.Millisecond, 4*time.Second, "SIGCONT "+n.name(), n.resume)
	nm.r.logf("nemesis: SIGSTOP %s (for %.1fs)", n.name(), d.Seconds())
	return nil
}

// restart stops n cleanly and starts it again (in the action's goroutine).
func (nm *nemesis) restart(n *node) error {
	nm.r.logf("nemesis: restart %s (SIGTERM, then start)", n.name())
	if err := n.stop(15 * time.Second); err != nil {
		nm.r.logf("nemesis: %v", err)
	}
	return n.start(nm.r.cfg.StartTimeout)
}

// partition cuts links as kind says and heals them 1–5 s later.
func (nm *nemesis) partition(kind string) error {
	n := len(nm.r.nodes)
	cut := netfault.LinkSet{}
	var desc string
	switch kind {
	case ActPartitionHalves:
		perm := nm.rng.Perm(n)
		minority := perm[:max(1, (n-1)/2)]
		in := map[int]bool{}
		for _, i := range minority {
			in[i] = true
		}
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				if in[a] != in[b] {
					cut[netfault.NewLink(a, b)] = true
				}
			}
		}
		clientSide := "clients reach both sides"
		if nm.rng.IntN(3) == 0 {
			for _, i := range minority {
				cut[netfault.NewLink(netfault.Client, i)] = true
			}
			clientSide = "clients reach the majority only"
		}
		desc = fmt.Sprintf("minority %v, %s", names(minority), clientSide)
	case ActPartitionLeader, ActPartitionLeaderClient:
		idx, r, ok := nm.leaderOfUserRange()
		if !ok {
			return refusedError{errors.New("no leader of a user range known")}
		}
		for b := 0; b < n; b++ {
			if b != idx {
				cut[netfault.NewLink(idx, b)] = true
			}
		}
		if kind == ActPartitionLeaderClient {
			cut[netfault.NewLink(netfault.Client, idx)] = true
		}
		desc = fmt.Sprintf("n%d, leader of r%d, isolated from the other nodes", idx+1, r.GetDesc().GetRangeId())
		if kind == ActPartitionLeaderClient {
			desc += " and the clients"
		}
	case ActPartitionLink:
		perm := nm.rng.Perm(n)
		cut[netfault.NewLink(perm[0], perm[1])] = true
		desc = "one link"
	}
	if err := nm.r.net.Apply(cut); err != nil {
		return err
	}
	nm.parted = true
	d := nm.later(time.Second, 5*time.Second, "heal "+cut.String(), func() error {
		nm.parted = false
		return nm.r.net.Apply(netfault.LinkSet{})
	})
	nm.r.logf("nemesis: cut %s: %s (heals in %.1fs)", cut, desc, d.Seconds())
	return nil
}

func names(idx []int) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = fmt.Sprintf("n%d", x+1)
	}
	sort.Strings(out)
	return out
}

// adminErr classifies an error of a split, merge or transfer: the typed errors of the client are
// the cluster declining or being unable to serve now (refused); anything else fails the run.
func adminErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) || errors.Is(err, context.DeadlineExceeded) {
		return refusedError{err}
	}
	return err
}

// splitKey draws a split key: a bucket of the workload's keys, or a point inside one.
func (nm *nemesis) splitKey() string {
	key := fmt.Sprintf("%02x", nm.rng.IntN(256))
	if nm.rng.IntN(2) == 0 {
		key += fmt.Sprintf("/u/w%d", nm.rng.IntN(10))
	}
	return key
}

// split returns the action that splits at key.
func (nm *nemesis) split(key string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		left, right, err := nm.r.ops.Split(ctx, []byte(key))
		if err != nil {
			return adminErr(err)
		}
		nm.r.logf("nemesis: split at %q: r%d | r%d", key, left.GetRangeId(), right.GetRangeId())
		return nil
	}
}

// merge returns the action that merges a random user range with its right neighbour.
func (nm *nemesis) merge() func() error {
	pick := nm.rng.Uint64() // drawn here: the loop owns the random source
	return func() error { return nm.mergeAt(pick) }
}

func (nm *nemesis) mergeAt(pick uint64) error {
	rs, err := nm.ranges(5 * time.Second)
	if err != nil {
		return refusedError{err}
	}
	var cands []*pb.RangeDescriptor
	for _, r := range rs {
		d := r.GetDesc()
		if d.GetRangeId() != metaRangeID && len(d.GetEndKey()) > 0 {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		return refusedError{errors.New("one user range only")}
	}
	d := cands[pick%uint64(len(cands))]
	key := d.GetStartKey()
	if len(key) == 0 {
		key = []byte("!") // below every key of the workload
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	merged, err := nm.r.ops.Merge(ctx, key)
	if err != nil {
		return adminErr(err)
	}
	nm.r.logf("nemesis: merge at %q: r%d now [%q, %q)", key, merged.GetRangeId(), merged.GetStartKey(), merged.GetEndKey())
	return nil
}

// transfer returns the action that moves a random range's leadership to another voter.
func (nm *nemesis) transfer() func() error {
	p1, p2 := nm.rng.Uint64(), nm.rng.Uint64()
	return func() error { return nm.transferAt(p1, p2) }
}

func (nm *nemesis) transferAt(p1, p2 uint64) error {
	rs, err := nm.ranges(5 * time.Second)
	if err != nil {
		return refusedError{err}
	}
	var led []*pb.RangeStatus
	for _, r := range rs {
		if r.GetLeaderNodeId() != 0 {
			led = append(led, r)
		}
	}
	if len(led) == 0 {
		return refusedError{errors.New("no range has a known leader")}
	}
	r := led[p1%uint64(len(led))]
	var to []uint64
	for _, rep := range r.GetDesc().GetReplicas() {
		if !rep.GetLearner() && rep.GetNodeId() != r.GetLeaderNodeId() {
			to = append(to, rep.GetNodeId())
		}
	}
	if len(to) == 0 {
		return refusedError{fmt.Errorf("r%d has no other voter", r.GetDesc().GetRangeId())}
	}
	target := to[p2%uint64(len(to))]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nm.r.ops.TransferLeader(ctx, r.GetDesc().GetRangeId(), target); err != nil {
		return adminErr(err)
	}
	nm.r.logf("nemesis: transfer leadership of r%d from node %d to node %d", r.GetDesc().GetRangeId(), r.GetLeaderNodeId(), target)
	return nil
}
