// Package autopilot ties the cluster model, the policies and the executor into the loop that keeps a
// Shoal cluster healthy and balanced: every Interval it takes a snapshot from the Source, asks the
// switched-on policies (in priority order) for operators, and submits them to the executor, which
// runs them through the Actuator and records every outcome in the decision log.
//
// It runs in exactly one place at a time: the node leading the meta range creates an Autopilot, Starts
// it when it gains that leadership and Stops it when it loses it. Operators are declarative, so the
// next leader's autopilot resumes whatever was left half done.
//
// The package owns the loop and its lifecycle. It must never read cluster state except through
// model.Source, never change the cluster except through the executor's Actuator (and the optional
// Decommissioner), and never import the node's packages (node, kv, replica, pb): the tests drive the same
// code on an in-memory cluster (autopilot/internal/fake).
package autopilot

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/executor"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/autopilot/policy"
)

// DefaultInterval is how often the autopilot runs its policies.
const DefaultInterval = time.Second

// Config configures an Autopilot; zero fields mean defaults.
type Config struct {
	// Interval between policy rounds. Default 1s.
	Interval time.Duration
	// Policies configures every policy.
	Policies policy.Config
	// Executor configures the executor (snapshot limits, timeouts).
	Executor executor.Config
	// DecisionLogSize is the number of decisions kept. Default 1024.
	DecisionLogSize int
	// MeasureAfter is how long after an operator finishes its benefit is measured. Default 10s.
	MeasureAfter time.Duration
	// OnDecision, if set, is called with every decision when it reaches its final status.
	OnDecision func(decisions.Entry) `json:"-"`
}

// WithDefaults returns c with every zero setting, its policies' and its executor's, at its default.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.DecisionLogSize == 0 {
		c.DecisionLogSize = decisions.DefaultCapacity
	}
	if c.MeasureAfter == 0 {
		c.MeasureAfter = decisions.DefaultWindow
	}
	c.Policies = c.Policies.WithDefaults()
	c.Executor = c.Executor.WithDefaults()
	return c
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	if c.Interval < 0 || c.MeasureAfter < 0 || c.DecisionLogSize < 0 {
		return fmt.Errorf("autopilot: interval, measure-after and decision log size must not be negative")
	}
	return c.Policies.Validate()
}

// Decommissioner is implemented by an Actuator that can mark a node decommissioned once the
// decommission policy has moved every replica off it. Without it, emptied nodes stay decommissioning.
type Decommissioner interface {
	MarkDecommissioned(ctx context.Context, node uint64) error
}

// JoinRecorder is implemented by actuators that keep nodes' join records (in the meta range), so
// that a join resumes wherever the autopilot runs next and users can follow it.
type JoinRecorder interface {
	RecordJoin(ctx context.Context, node uint64, j model.Join) error
}

// Round is what one policy round did.
type Round struct {
	Now       time.Time
	Proposed  []*operator.Operator
	Submitted []*operator.Operator
	Rejected  map[uint64]error // by range ID: why the executor refused the proposal
	Marked    []uint64         // nodes marked decommissioned
}

// Autopilot is the policy loop plus its executor and decision log.
type Autopilot struct {
	cfg      Config
	src      model.Source
	act      executor.Actuator
	registry *policy.Registry
	exec     *executor.Executor
	log      *decisions.Log

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	marking map[uint64]time.Time // node → when last marked decommissioned

	// progress is poked by the executor when an operator finishes or moves to its next step; the
	// loop then runs a reactive round (policy.Reactive) at once.
	progress chan struct{}

	// unrecorded are join records whose write failed, by node, written again at the next round
	// unless a newer record of the node supersedes them: incremental_join decides from its own
	// copy and does not decide a change twice, so a lost "done" left the join unfinished for ever
	// in the meta range (rounds are serialized, like the policies' own state).
	unrecorded map[uint64]policy.JoinMark
}

// New returns a stopped autopilot reading src and acting through act. It panics on an invalid Config:
// validate configuration at start-up with Config.Validate.
func New(src model.Source, act executor.Actuator, cfg Config) *Autopilot {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.WithDefaults()
	log := decisions.NewLog(cfg.DecisionLogSize, cfg.MeasureAfter)
	if cfg.OnDecision != nil {
		log.SetOnFinish(cfg.OnDecision)
	}
	a := &Autopilot{cfg: cfg, src: src, act: act, registry: policy.Default(cfg.Policies), log: log,
		marking: map[uint64]time.Time{}, progress: make(chan struct{}, 1), unrecorded: map[uint64]policy.JoinMark{}}
	ecfg := cfg.Executor
	onProgress := ecfg.OnProgress
	ecfg.OnProgress = func() {
		a.Poke()
		if onProgress != nil {
			onProgress()
		}
	}
	a.exec = executor.New(src, act, log, ecfg)
	return a
}

// Poke asks the loop for a reactive round now (policy.Reactive policies only). The executor calls it
// when an operator made progress, and the node's autopilot host when a node sends its first load
// report, so that a join starts then rather than at the next round, up to an Interval later. (Poking
// at a node's registration, before it serves, planned joins that finished without their leadership
// share.)
func (a *Autopilot) Poke() {
	select {
	case a.progress <- struct{}{}:
	default:
	}
}

// Policies returns the policy registry (switches, listing).
func (a *Autopilot) Policies() *policy.Registry { return a.registry }

// Decisions returns the decision log.
func (a *Autopilot) Decisions() *decisions.Log { return a.log }

// Executor returns the executor (pending operators, debugging).
func (a *Autopilot) Executor() *executor.Executor { return a.exec }

// SetPolicy switches a policy on or off (`shoal admin policy set NAME on|off`). Switching a policy off
// also cancels its pending operators: an operator's steps are declarative, so whatever they left
// (e.g. a learner) is either finished by the policy when it is back on or cleaned up by replicate.
func (a *Autopilot) SetPolicy(name string, on bool) error {
	if err := a.registry.Set(name, on); err != nil {
		return err
	}
	if !on {
		a.exec.CancelPolicy(name, fmt.Sprintf("policy %s switched off", name))
	}
	return nil
}

// Start starts the executor and the policy loop. Starting a running autopilot does nothing.
func (a *Autopilot) Start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	a.exec.Start()
	go a.loop(ctx, a.done)
}

// Stop stops the loop and the executor and waits for them. Operators still running are recorded as
// stopped. Stopping a stopped autopilot does nothing.
func (a *Autopilot) Stop() {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel, a.done = nil, nil
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	a.exec.Stop()
}

func (a *Autopilot) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	// Reactive rounds come at most every minGap: the executor reports progress at most every time
	// one of its calls returns, and a burst of them needs only one round.
	minGap := min(a.cfg.Interval/10, 100*time.Millisecond)
	var lastReactive time.Time
	for {
		reactive := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.progress:
			reactive = true
			if wait := minGap - time.Since(lastReactive); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			lastReactive = time.Now()
		}
		c := a.src.Snapshot()
		switch {
		case c == nil:
		case reactive:
			a.tick(ctx, c, true)
		default:
			a.Tick(ctx, c)
		}
	}
}

// Tick runs one policy round on c: propose, submit, and mark emptied decommissioning nodes. The loop
// calls it every Interval; tests call it directly (with Step).
func (a *Autopilot) Tick(ctx context.Context, c *model.Cluster) Round { return a.tick(ctx, c, false) }

// TickReactive runs one reactive round on c (the policy.Reactive policies only), as the loop does
// when the executor reports progress. A simulator drives the autopilot on a virtual clock with Tick,
// TickReactive and the executor's Reconcile instead of Start.
func (a *Autopilot) TickReactive(ctx context.Context, c *model.Cluster) Round {
	return a.tick(ctx, c, true)
}

// tick is Tick; reactive runs only the policy.Reactive policies (a round triggered by an operator's
// progress, between the regular rounds).
func (a *Autopilot) tick(ctx context.Context, c *model.Cluster, reactive bool) Round {
	round := Round{Now: c.Now, Rejected: map[uint64]error{}}
	pending := a.exec.Pending()
	if reactive {
		round.Proposed = a.registry.ProposeReactive(c, pending)
	} else {
		round.Proposed = a.registry.Propose(c, pending)
	}
	for _, op := range round.Proposed {
		if err := a.exec.Submit(op); err != nil {
			round.Rejected[op.RangeID] = err
			continue
		}
		round.Submitted = append(round.Submitted, op)
	}
	a.recordJoins(ctx, c)
	for name, notes := range a.registry.TakeNotes() {
		for _, n := range notes {
			a.log.Note(name, n.What, n.Why, n.Status, c.Now)
		}
	}
	round.Marked = a.markDecommissioned(ctx, c)
	return round
}

// Step is Tick followed by one executor reconciliation on the same snapshot: a whole autopilot cycle,
// for tests that run the executor inline.
func (a *Autopilot) Step(ctx context.Context, c *model.Cluster) Round {
	r := a.Tick(ctx, c)
	a.exec.Reconcile(c)
	return r
}

func (a *Autopilot) markDecommissioned(ctx context.Context, c *model.Cluster) []uint64 {
	d, ok := a.act.(Decommissioner)
	if !ok || !a.registry.Enabled(policy.NameDecommission) {
		return nil
	}
	dp, ok := a.registry.Policy(policy.NameDecommission).(*policy.Decommission)
	if !ok {
		return nil
	}
	var marked []uint64
	for _, id := range dp.Completed(c, a.exec.Pending()) {
		a.mu.Lock()
		last, seen := a.marking[id]
		a.mu.Unlock()
		if seen && c.Now.Sub(last) < 10*a.cfg.Interval {
			continue // asked recently; wait for the model to show it
		}
		a.mu.Lock()
		a.marking[id] = c.Now
		a.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, a.exec.Config().Timeouts.Base)
		err := d.MarkDecommissioned(cctx, id)
		cancel()
		what, why := fmt.Sprintf("mark n%d decommissioned", id), fmt.Sprintf("n%d holds no replicas any more", id)
		if err != nil {
			a.log.Note(policy.NameDecommission, what, why, fmt.Sprintf("%s: %v", decisions.StatusFailed, err), c.Now)
			continue
		}
		a.log.Note(policy.NameDecommission, what, why, decisions.StatusSucceeded, c.Now)
		marked = append(marked, id)
	}
	return marked
}

// writtenAgain prefixes the reason of a join record written again after a failed write.
const writtenAgain = "written again (the last write failed): "

// recordJoins writes the join records incremental_join decided in this round, and those whose write
// failed in an earlier round, and logs each change.
func (a *Autopilot) recordJoins(ctx context.Context, c *model.Cluster) {
	jp, ok := a.registry.Policy(policy.NameJoin).(*policy.IncrementalJoin)
	if !ok {
		return
	}
	marks := jp.Marks()
	jr, ok := a.act.(JoinRecorder)
	if !ok {
		return
	}
	superseded := map[uint64]bool{}
	for _, m := range marks {
		superseded[m.Node] = true
	}
	var retries []policy.JoinMark
	for node, m := range a.unrecorded {
		if !superseded[node] {
			if !strings.HasPrefix(m.Why, writtenAgain) {
				m.Why = writtenAgain + m.Why
			}
			retries = append(retries, m)
		}
		delete(a.unrecorded, node)
	}
	sort.Slice(retries, func(i, j int) bool { return retries[i].Node < retries[j].Node })
	for _, m := range append(retries, marks...) {
		state := "joining"
		switch {
		case !m.Join.Done.IsZero():
			state = "joined"
		case !m.Join.FirstServed.IsZero():
			state = "partially joined"
		}
		cctx, cancel := context.WithTimeout(ctx, a.exec.Config().Timeouts.Base)
		err := jr.RecordJoin(cctx, m.Node, m.Join)
		cancel()
		status := decisions.StatusSucceeded
		if err != nil {
			status = fmt.Sprintf("%s: %v", decisions.StatusFailed, err)
			a.unrecorded[m.Node] = m // marks are in order: a later one of the node replaces it
		} else {
			delete(a.unrecorded, m.Node)
		}
		a.log.Note(policy.NameJoin, fmt.Sprintf("n%d %s", m.Node, state), m.Why, status, c.Now)
	}
}
