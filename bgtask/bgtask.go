// Package bgtask tracks one node's background work — storage compactions and flushes, backups, manual
// compactions and maintenance announced by an operator's own job — and gates the heavy ones: a heavy
// task first waits, as "pending", until the node has handed away the leaderships it can hand away
// (docs/design/shed-leadership.md, chapter 3 of the Papaioannou thesis).
//
// The package owns the node's list of tasks, the time each kind last completed, the ranges the node led
// when its last heavy task was requested, and the waiting rule. It must never move a leadership or
// read cluster state itself: the autopilot's shed_leadership policy moves leaderships, and the node
// tells the gate through a Condition whether it may proceed and calls Notify when the cluster's
// status changes.
package bgtask

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Kind names a sort of background task; it is reported in heartbeats and the decision log.
type Kind string

// Kinds of task.
const (
	KindCompaction       Kind = "compaction"        // an automatic compaction of the storage engine
	KindFlush            Kind = "flush"             // a memtable flush (never heavy)
	KindManualCompaction Kind = "manual_compaction" // `shoal admin compact`, or a periodic full compaction
	KindBackup           Kind = "backup"            // `shoal admin backup`, or a periodic backup
	KindAnnounced        Kind = "announced"         // `shoal admin maintenance`: an operator's own job
)

// State is where a task is in its life: pending tasks wait at the gate, running ones are under way.
type State int

// Task states.
const (
	Pending State = iota
	Running
)

func (s State) String() string {
	if s == Pending {
		return "pending"
	}
	return "running"
}

// Config says what is heavy and how long a heavy task may be postponed. Zero fields take defaults.
type Config struct {
	// HeavyCompactionBytes is the input size from which an automatic compaction counts as heavy
	// (default 128 MiB). Manual compactions, backups and announced tasks are always heavy.
	HeavyCompactionBytes uint64
	// MaxPostpone bounds how long a heavy task waits for the node's leaderships to move (default 5 min);
	// then it runs anyway.
	MaxPostpone time.Duration
	// ReturnWindow is how long after its last heavy task ends the node keeps reporting the ranges it
	// led before (for the preferred-primary ranking, default 10 min).
	ReturnWindow time.Duration
	// Recheck is how often a waiting task re-evaluates its condition besides Notify (default 100ms).
	Recheck time.Duration
}

// WithDefaults returns c with every zero setting at its default.
func (c Config) WithDefaults() Config {
	if c.HeavyCompactionBytes == 0 {
		c.HeavyCompactionBytes = 128 << 20
	}
	if c.MaxPostpone == 0 {
		c.MaxPostpone = 5 * time.Minute
	}
	if c.ReturnWindow == 0 {
		c.ReturnWindow = 10 * time.Minute
	}
	if c.Recheck == 0 {
		c.Recheck = 100 * time.Millisecond
	}
	return c
}

// Task is one background task as reported.
type Task struct {
	ID    uint64
	Kind  Kind
	Name  string
	State State
	Heavy bool
	Bytes uint64
	// Since is when the task was requested (pending) or started (running).
	Since time.Time
	// Until is when an announced task is expected to end (zero for others).
	Until time.Time
}

// Status is what the node reports about its background work in a heartbeat.
type Status struct {
	Tasks []Task // sorted by ID
	// LastCompleted is when each kind of task last finished (flushes are not tracked).
	LastCompleted map[Kind]time.Time
	// LedBefore are the ranges the node led when its last heavy task was requested; reported while a
	// heavy task is pending or running and for ReturnWindow after the last one ended.
	LedBefore []uint64
}

// Busy reports whether a heavy task is pending or running: the node should not lead.
func (s Status) Busy() bool {
	for _, t := range s.Tasks {
		if t.Heavy {
			return true
		}
	}
	return false
}

// Tracker is a node's record of its background tasks. Safe for concurrent use.
type Tracker struct {
	cfg Config
	now func() time.Time

	mu        sync.Mutex
	next      uint64
	tasks     map[uint64]*Task
	lastDone  map[Kind]time.Time
	ledBefore []uint64
	lastHeavy time.Time // when the last heavy task ended (for ReturnWindow)
	changed   chan struct{}
	leading   func() []uint64 // ranges this node leads now; set by the node
	onChange  func()          // called (outside the lock) when a heavy task appears or ends
}

// NewTracker returns an empty tracker; now may be nil (time.Now).
func NewTracker(cfg Config, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{cfg: cfg.WithDefaults(), now: now, tasks: map[uint64]*Task{}, lastDone: map[Kind]time.Time{},
		changed: make(chan struct{})}
}

// Config returns the tracker's configuration with defaults filled in.
func (t *Tracker) Config() Config { return t.cfg }

// SetHooks wires the node: leading lists the ranges it leads now (recorded when a heavy task is
// requested), onChange is called when a heavy task appears or ends (the node sends a heartbeat at
// once rather than at its next interval). Either may be nil.
func (t *Tracker) SetHooks(leading func() []uint64, onChange func()) {
	t.mu.Lock()
	t.leading, t.onChange = leading, onChange
	t.mu.Unlock()
}

// Handle is a started (or pending) task; End finishes it. End is idempotent.
type Handle struct {
	t    *Tracker
	id   uint64
	once sync.Once
}

// ID is the task's id (0 for a nil handle).
func (h *Handle) ID() uint64 {
	if h == nil {
		return 0
	}
	return h.id
}

// End marks the task finished and records the completion time of its kind.
func (h *Handle) End() {
	if h == nil {
		return
	}
	h.once.Do(func() { h.t.end(h.id) })
}

// SetBytes updates the bytes the task has handled so far (reported, e.g. a backup's progress).
func (h *Handle) SetBytes(b uint64) {
	if h == nil {
		return
	}
	h.t.mu.Lock()
	if task := h.t.tasks[h.id]; task != nil {
		task.Bytes = b
	}
	h.t.mu.Unlock()
}

// Begin records a task that starts now, without waiting (followers' work, automatic compactions,
// flushes). An automatic compaction is heavy when its input reaches HeavyCompactionBytes.
func (t *Tracker) Begin(kind Kind, name string, bytes uint64) *Handle {
	return t.add(Task{Kind: kind, Name: name, State: Running, Heavy: t.heavy(kind, bytes), Bytes: bytes})
}

func (t *Tracker) heavy(kind Kind, bytes uint64) bool {
	switch kind {
	case KindFlush:
		return false
	case KindCompaction:
		return bytes >= t.cfg.HeavyCompactionBytes
	default:
		return true
	}
}

func (t *Tracker) add(task Task) *Handle {
	t.mu.Lock()
	t.next++
	task.ID = t.next
	task.Since = t.now()
	t.tasks[task.ID] = &task
	hook := t.heavyAppearedLocked(task)
	t.broadcastLocked()
	t.mu.Unlock()
	if hook != nil {
		hook()
	}
	return &Handle{t: t, id: task.ID}
}

// heavyAppearedLocked records the ranges led when the first heavy task of a busy period appears and
// returns the onChange hook to call (nil when nothing heavy changed).
func (t *Tracker) heavyAppearedLocked(task Task) func() {
	if !task.Heavy {
		return nil
	}
	if t.leading != nil && !t.busyLocked(task.ID) {
		if led := t.leading(); len(led) > 0 || t.now().Sub(t.lastHeavy) > t.cfg.ReturnWindow {
			t.ledBefore = append([]uint64(nil), led...)
		}
	}
	return t.onChange
}

func (t *Tracker) end(id uint64) {
	t.mu.Lock()
	task := t.tasks[id]
	if task == nil {
		t.mu.Unlock()
		return
	}
	delete(t.tasks, id)
	now := t.now()
	if task.Kind != KindFlush && task.State == Running {
		t.lastDone[task.Kind] = now
	}
	var hook func()
	if task.Heavy {
		t.lastHeavy = now
		hook = t.onChange
	}
	t.broadcastLocked()
	t.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// busyLocked reports whether a heavy task other than except is pending or running.
func (t *Tracker) busyLocked(except uint64) bool {
	for id, task := range t.tasks {
		if id != except && task.Heavy {
			return true
		}
	}
	return false
}

// Status returns the tasks and completion times to report.
func (t *Tracker) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	st := Status{LastCompleted: make(map[Kind]time.Time, len(t.lastDone))}
	for _, task := range t.tasks {
		if task.Kind == KindAnnounced && !task.Until.IsZero() && now.After(task.Until) && task.State == Running {
			continue // expired; the announcer's End will remove it
		}
		st.Tasks = append(st.Tasks, *task)
	}
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	for k, v := range t.lastDone {
		st.LastCompleted[k] = v
	}
	if t.busyLocked(0) || (!t.lastHeavy.IsZero() && now.Sub(t.lastHeavy) <= t.cfg.ReturnWindow) {
		st.LedBefore = append([]uint64(nil), t.ledBefore...)
	}
	return st
}

// Notify wakes every task waiting at the gate to re-evaluate its condition: the node calls it on every
// status change (a heartbeat received, a leadership gained or lost).
func (t *Tracker) Notify() {
	t.mu.Lock()
	t.broadcastLocked()
	t.mu.Unlock()
}

func (t *Tracker) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *Tracker) waitCh() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Condition tells a waiting heavy task whether it may run now and why (for the log and the reply).
type Condition func() (proceed bool, why string)

// Outcome is how a heavy task got past the gate.
type Outcome struct {
	// Waited is how long the task was pending.
	Waited time.Duration
	// GaveUp is set when the task ran because MaxPostpone passed, not because its condition held.
	GaveUp bool
	// Why is the condition's last reason.
	Why string
}

func (o Outcome) String() string {
	if o.GaveUp {
		return fmt.Sprintf("ran anyway after postponing %s: %s", o.Waited.Round(time.Millisecond), o.Why)
	}
	return fmt.Sprintf("started after %s: %s", o.Waited.Round(time.Millisecond), o.Why)
}

// Acquire registers a heavy task as pending, waits until cond says it may proceed (re-evaluated on
// every Notify and every Recheck) or MaxPostpone passes, and returns it running. A ctx that ends first
// withdraws the task and returns ctx's error. until is the expected end of an announced task (zero
// otherwise).
func (t *Tracker) Acquire(ctx context.Context, kind Kind, name string, until time.Time, cond Condition) (*Handle, Outcome, error) {
	h := t.add(Task{Kind: kind, Name: name, State: Pending, Heavy: true, Until: until})
	start := t.now()
	tick := time.NewTicker(t.cfg.Recheck)
	defer tick.Stop()
	for {
		ch := t.waitCh()
		ok, why := cond()
		waited := t.now().Sub(start)
		if ok || waited >= t.cfg.MaxPostpone {
			t.mu.Lock()
			if task := t.tasks[h.id]; task != nil {
				task.State, task.Since = Running, t.now()
			}
			t.broadcastLocked()
			t.mu.Unlock()
			return h, Outcome{Waited: waited, GaveUp: !ok, Why: why}, nil
		}
		select {
		case <-ctx.Done():
			h.End()
			return nil, Outcome{Waited: waited, Why: why}, fmt.Errorf("%s %q withdrawn while pending: %w", kind, name, ctx.Err())
		case <-ch:
		case <-tick.C:
		}
	}
}

// Jittered returns the delay before the next run of a periodic task of period base: uniform in
// [base, 1.5·base), so that replicas started together drift apart (the thesis draws 30–45 min).
func Jittered(base time.Duration, rng *rand.Rand) time.Duration {
	if base <= 0 {
		return 0
	}
	return base + time.Duration(rng.Int64N(int64(base)/2+1))
}

// FirstDelay is the delay before the first run of a periodic task: uniform in [0, base), so nodes
// that boot together do not run it in step.
func FirstDelay(base time.Duration, rng *rand.Rand) time.Duration {
	if base <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(base)))
}
