// Package decisions is the autopilot's decision log: every operator it submitted, with the policy that
// proposed it, the reason, the predicted benefit, how it ended and — measured on the cluster model a
// window after it finished — the benefit it actually had. It is how a user checks the autopilot's work
// (shoal admin decisions, /api/decisions).
//
// The package owns the bounded in-memory log and the measurement of finished operators. It must never
// propose, run or cancel operators; it only records what the executor reports and reads snapshots.
//
// Besides the benefit the policy predicted (a structural metric: gaps, counts, a range's QPS), every
// range operator gets its effect in users' terms (Throughput): the requests per second of the key
// span it changed, averaged over Window before it started and over Window after it finished, and the
// p50 and p99 latency of the requests its ranges' leaders served in those windows (from the latency
// histograms the leaders report with their load, added up over the span's ranges and the window's
// snapshots).
//
// Invariant: at most Capacity entries are kept; the oldest are dropped first. An entry's Measured is
// set at most once, only for a succeeded operator, from the first snapshot at least Window after it
// finished; its Throughput.After likewise, from the snapshots of that Window. The log keeps the
// ranges' load of the snapshots of the last Window only (for the Throughput.Before of new operators).
// A range's latency histogram is counted once however many snapshots carry the same report. An
// entry restored with its window after still open (its autopilot moved) gets that window anew, from
// the restore.
package decisions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// Defaults.
const (
	DefaultCapacity = 1024
	// DefaultWindow is how long after an operator finishes its benefit is measured: long enough for
	// a few heartbeats to report the new load.
	DefaultWindow = 10 * time.Second
)

// Statuses. Failed, canceled, timed-out and replaced entries carry the cause after a colon, e.g.
// "canceled: n4 is draining".
const (
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
	StatusTimedOut  = "timed out"
	StatusReplaced  = "replaced"
	StatusStopped   = "stopped" // the autopilot stopped (meta leadership moved) while it ran
)

// Entry is one decision. Its JSON form is the contract of `shoal admin decisions --format json` and
// /api/decisions: time, policy, operator, reason, predicted, measured, plus id, range and status.
type Entry struct {
	ID        uint64           `json:"id"`
	Time      time.Time        `json:"time"`
	Policy    string           `json:"policy"`
	Operator  string           `json:"operator"`
	Kind      string           `json:"-"` // operator kind, for metrics (not part of the JSON contract)
	Range     uint64           `json:"range"`
	Reason    string           `json:"reason"`
	Predicted operator.Benefit `json:"predicted"`
	Measured  *Measurement     `json:"measured"`
	Status    string           `json:"status"`
	// Notes are what the executor observed while running the operator, oldest first (e.g. the
	// warmth of a transfer's target, read hints).
	Notes []string `json:"notes,omitempty"`
	// Steps are the operator's step calls as they returned, oldest first: the step, how long its
	// call took and its error, if any (where an operator's time went: a snapshot, a warmth wait).
	Steps []StepTiming `json:"steps,omitempty"`
	// Throughput is the load of the key span the operator changed before and after it (null for
	// decisions that change no range, and for an operator the log has seen no snapshot of yet).
	Throughput *Throughput `json:"throughput"`
}

// Throughput is an operator's effect in users' terms: the requests per second served in the key span
// it changed (its range's span, or the span its predicted benefit names: a merge's two ranges), over
// Window before it started and over Window after it finished. After is null until then, and stays
// null for an operator that did not succeed.
type Throughput struct {
	Span   string      `json:"span"`
	Before *LoadWindow `json:"before"`
	After  *LoadWindow `json:"after"`
	// Detail says why a window is missing or thin, e.g. "no snapshot before it started".
	Detail string `json:"detail,omitempty"`
}

// LoadWindow is the span's load averaged over the snapshots taken From..To: reads and writes per
// second as the ranges' leaders reported them, and the number of ranges in the span at To; and the
// latency of the requests the leaders served in the reports those snapshots carried: how many
// requests were timed, their p50 and p99 in milliseconds (null when none was timed).
type LoadWindow struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Samples  int       `json:"samples"`
	Ranges   int       `json:"ranges"`
	QPS      float64   `json:"qps"`
	ReadQPS  float64   `json:"read_qps"`
	WriteQPS float64   `json:"write_qps"`
	Timed    uint64    `json:"timed"`
	P50Ms    *float64  `json:"p50_ms"`
	P99Ms    *float64  `json:"p99_ms"`
}

// StepTiming is one step call of an operator.
type StepTiming struct {
	Step  string  `json:"step"`
	TookS float64 `json:"took_s"`
	Error string  `json:"error,omitempty"`
}

// Measurement is the realized benefit: the predicted metric before the operator and a window after it.
type Measurement struct {
	Metric operator.Metric `json:"metric"`
	Before float64         `json:"before"`
	After  float64         `json:"after"`
	Delta  float64         `json:"delta"`
	At     time.Time       `json:"at"`
	Detail string          `json:"detail,omitempty"`
}

type record struct {
	Entry
	benefit  operator.Benefit
	finished time.Time // zero while running
	scope    *scope    // the key span whose throughput is measured (nil: not resolved yet, or none)
	after    loadSum   // the span's load over the snapshots after the operator finished
	resolved bool      // scope was looked for
	// reopened: restored with its window after still open (the autopilot that ran it moved away
	// within a Window of its end); the window after is measured again from the restore.
	reopened bool
}

// scope is what an operator's throughput covers: the user ranges overlapping [start, end), or one
// system range.
type scope struct {
	start, end []byte
	system     uint64 // a system range's id (0: a span of user ranges)
}

// loadSample is the ranges' load in one snapshot.
type loadSample struct {
	at time.Time
	// ranges are the snapshot's own (a Cluster is immutable): system ranges first, then user ranges
	// by start key. Copying 100 000 of them per snapshot cost more than the policies' work.
	ranges []*model.Range
	// user are the user ranges among them (the snapshot's UserRanges: its last ones).
	user []*model.Range
	// fresh are the ranges whose latency report this snapshot is the first to carry (nil: none).
	fresh map[uint64]bool
}

// loadSum adds up a span's load over snapshots.
type loadSum struct {
	from, to    time.Time
	n, ranges   int
	read, write float64
	latency     *model.LatencyCounts // nil until a report is added
}

// add adds sc's load in smp.
func (s *loadSum) add(sc *scope, smp loadSample) {
	if s.n == 0 {
		s.from = smp.at
	}
	s.to, s.ranges = smp.at, 0
	s.n++
	for _, r := range sc.candidates(smp.ranges, smp.user) {
		if !sc.covers(r) {
			continue
		}
		s.ranges++
		s.read += r.ReadQPS
		s.write += r.WriteQPS
		if smp.fresh[r.ID] {
			if s.latency == nil {
				s.latency = &model.LatencyCounts{}
			}
			s.latency.Add(r.Latency)
		}
	}
}

func (s *loadSum) window() *LoadWindow {
	if s.n == 0 {
		return nil
	}
	n := float64(s.n)
	w := &LoadWindow{From: s.from, To: s.to, Samples: s.n, Ranges: s.ranges, QPS: (s.read + s.write) / n,
		ReadQPS: s.read / n, WriteQPS: s.write / n}
	if s.latency != nil && s.latency.Count() > 0 {
		w.Timed = s.latency.Count()
		w.P50Ms, w.P99Ms = millis(s.latency.Quantile(0.5)), millis(s.latency.Quantile(0.99))
	}
	return w
}

// millis is d in milliseconds, rounded to the microsecond.
func millis(d time.Duration) *float64 {
	ms := math.Round(float64(d)/float64(time.Microsecond)) / 1000
	return &ms
}

// candidates is the run of rs that sc may cover. rs is in the model's order (system ranges first,
// then user ranges by start key, disjoint; user is their tail of user ranges), so a span's ranges
// are contiguous: found by binary search rather than a scan of every range for every open operator.
func (sc *scope) candidates(rs, user []*model.Range) []*model.Range {
	if sc.system != 0 {
		return rs[:len(rs)-len(user)]
	}
	lo := sort.Search(len(user), func(i int) bool { return len(user[i].EndKey) == 0 || bytes.Compare(user[i].EndKey, sc.start) > 0 })
	hi := len(user)
	if len(sc.end) > 0 {
		hi = sort.Search(len(user), func(i int) bool { return bytes.Compare(user[i].StartKey, sc.end) >= 0 })
	}
	return user[lo:max(lo, hi)]
}

// covers reports whether r counts in sc: sc's system range, or a user range overlapping sc's span.
func (sc *scope) covers(r *model.Range) bool {
	if sc.system != 0 {
		return r.ID == sc.system
	}
	return !r.System && (len(sc.end) == 0 || bytes.Compare(r.StartKey, sc.end) < 0) && (len(r.EndKey) == 0 || bytes.Compare(r.EndKey, sc.start) > 0)
}

// Log is the bounded decision log. Safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	capacity int
	window   time.Duration
	ring     []*record // oldest first
	open     []*record // the ring's records Observe still measures, oldest first
	byID     map[uint64]*record
	nextID   uint64
	onFinish func(Entry)  // called, outside the lock, when an entry reaches its final status
	samples  []loadSample // the ranges' load in the snapshots of the last window, oldest first
	// latencyAt is, per range, the end of the latency window of its last report seen: a report is
	// counted in the first snapshot that carries it only.
	latencyAt map[uint64]time.Time
}

// SetOnFinish registers fn to be called with every entry that reaches its final status (for
// counters by policy, kind and outcome). Call before the log is used.
func (l *Log) SetOnFinish(fn func(Entry)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onFinish = fn
}

// Outcome is the first word of a status: "succeeded", "failed", "canceled", ...
func Outcome(status string) string {
	if i := strings.IndexByte(status, ':'); i >= 0 {
		return status[:i]
	}
	return status
}

// NewLog returns a log keeping capacity entries (DefaultCapacity if <= 0) and measuring window after an
// operator finishes (DefaultWindow if <= 0).
func NewLog(capacity int, window time.Duration) *Log {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Log{capacity: capacity, window: window, byID: map[uint64]*record{}, nextID: 1}
}

// Window is how long after an operator finishes its benefit is measured.
func (l *Log) Window() time.Duration { return l.window }

func (l *Log) push(rec *record) {
	if len(l.ring) == l.capacity {
		delete(l.byID, l.ring[0].ID)
		l.ring[0] = nil
		l.ring = l.ring[1:]
	}
	l.ring = append(l.ring, rec)
	l.byID[rec.ID] = rec
	l.open = append(l.open, rec)
}

// Record logs op as running at at. If op.ID is 0 the log assigns the next ID and stores it in op.ID.
func (l *Log) Record(op *operator.Operator, at time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if op.ID == 0 {
		op.ID = l.nextID
	}
	if op.ID >= l.nextID {
		l.nextID = op.ID + 1
	}
	l.push(&record{Entry: Entry{ID: op.ID, Time: at, Policy: op.Policy, Operator: op.String(), Kind: op.Kind, Range: op.RangeID,
		Reason: op.Reason, Predicted: op.PredictedBenefit, Status: StatusRunning}, benefit: op.PredictedBenefit})
	return op.ID
}

// Note logs a decision that is not a range operator (e.g. a node marked decommissioned), already over
// with status.
func (l *Log) Note(policy, what, reason, status string, at time.Time) uint64 {
	l.mu.Lock()
	id := l.nextID
	l.nextID++
	rec := &record{Entry: Entry{ID: id, Time: at, Policy: policy, Operator: what, Kind: "note", Reason: reason,
		Status: status}, finished: at}
	l.push(rec)
	fn, e := l.onFinish, rec.Entry
	l.mu.Unlock()
	if fn != nil {
		fn(e)
	}
	return id
}

// Finish sets the final status of the operator with id (a Status constant, optionally followed by ": "
// and the cause). Unknown or already finished IDs are ignored.
func (l *Log) Finish(id uint64, status string, at time.Time) {
	l.mu.Lock()
	rec := l.byID[id]
	if rec == nil || !rec.finished.IsZero() {
		l.mu.Unlock()
		return
	}
	rec.Status, rec.finished = status, at
	fn, e := l.onFinish, rec.Entry
	l.mu.Unlock()
	if fn != nil {
		fn(e)
	}
}

// Annotate adds a note to the entry with id (what the executor saw while running it). Unknown IDs are
// ignored; at most maxNotes notes are kept per entry.
func (l *Log) Annotate(id uint64, note string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec := l.byID[id]; rec != nil && len(rec.Notes) < maxNotes {
		rec.Notes = append(rec.Notes, note)
	}
}

// StepDone records that a step call of the entry with id returned after took (err: its error).
// Unknown IDs are ignored; at most maxNotes steps are kept per entry.
func (l *Log) StepDone(id uint64, step string, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec := l.byID[id]; rec != nil && len(rec.Steps) < maxNotes {
		st := StepTiming{Step: step, TookS: math.Round(took.Seconds()*1000) / 1000}
		if err != nil {
			st.Error = err.Error()
		}
		rec.Steps = append(rec.Steps, st)
	}
}

// maxNotes bounds the notes (and the step timings) of one entry.
const maxNotes = 16

// Observe measures, on c, every succeeded operator that finished at least Window before c.Now and has
// not been measured yet, and adds c's load to the operators' throughput windows.
func (l *Log) Observe(c *model.Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sampleLocked(c)
	// Only the records with something left to measure: walking the whole ring on every snapshot
	// grew with decisions × snapshots.
	keep := l.open[:0]
	for _, rec := range l.open {
		if l.byID[rec.ID] != rec {
			continue // evicted from the ring
		}
		l.measureLocked(rec, c)
		if !rec.settled() {
			keep = append(keep, rec)
		}
	}
	clear(l.open[len(keep):])
	l.open = keep
}

func (l *Log) measureLocked(rec *record, c *model.Cluster) {
	l.throughputLocked(rec, c)
	if rec.Measured != nil || rec.finished.IsZero() || rec.Status != StatusSucceeded || rec.benefit.Metric == "" {
		return
	}
	if c.Now.Sub(rec.finished) < l.window {
		return
	}
	after, detail, ok := operator.Measure(rec.benefit, c)
	if !ok {
		rec.Measured = &Measurement{Metric: rec.benefit.Metric, Before: rec.benefit.Before, After: rec.benefit.Before,
			At: c.Now, Detail: "not measurable: what it changed is no longer in the cluster"}
		return
	}
	rec.Measured = &Measurement{Metric: rec.benefit.Metric, Before: rec.benefit.Before, After: after,
		Delta: after - rec.benefit.Before, At: c.Now, Detail: detail}
}

// settled reports whether Observe has nothing more to do for rec: its status is final, its benefit
// measured (or not measurable) and its throughput windows closed (or not measured).
func (rec *record) settled() bool {
	if !rec.resolved || rec.finished.IsZero() {
		return false
	}
	succeeded := rec.Status == StatusSucceeded
	measured := rec.Measured != nil || !succeeded || rec.benefit.Metric == ""
	windows := rec.scope == nil || rec.Throughput == nil || rec.Throughput.After != nil || !succeeded
	return measured && windows
}

// sampleLocked keeps c's range loads, and drops the samples older than the window (but the newest of
// them: it is the load as the window starts).
func (l *Log) sampleLocked(c *model.Cluster) {
	if n := len(l.samples); n > 0 && !c.Now.After(l.samples[n-1].at) {
		return // the same snapshot again
	}
	smp := loadSample{at: c.Now, ranges: c.Ranges, user: c.UserRanges()}
	var seen map[uint64]time.Time // allocated for the first latency: a source may report none
	ranges := c.Ranges
	if c.Latencies() == 0 {
		ranges = nil // none to look for (the simulator's): no pass over every range per snapshot
	}
	for _, r := range ranges {
		if h := r.Latency; h != nil {
			if seen == nil {
				seen = map[uint64]time.Time{}
			}
			seen[r.ID] = h.At
			if prev, ok := l.latencyAt[r.ID]; !ok || !prev.Equal(h.At) {
				if smp.fresh == nil {
					smp.fresh = map[uint64]bool{}
				}
				smp.fresh[r.ID] = true
			}
		}
	}
	l.latencyAt = seen
	l.samples = append(l.samples, smp)
	drop := 0
	for drop+1 < len(l.samples) && c.Now.Sub(l.samples[drop+1].at) > l.window {
		drop++
	}
	if drop > 0 {
		clear(l.samples[:drop])
		l.samples = l.samples[drop:]
	}
}

// throughputLocked moves rec's throughput on with snapshot c (already sampled): at the first snapshot
// after the operator was recorded, it finds the span and averages its load over the window before;
// after the operator succeeded, it adds c's load to the window after, and closes it a Window later.
func (l *Log) throughputLocked(rec *record, c *model.Cluster) {
	if !rec.resolved {
		l.resolveLocked(rec, c)
	}
	if rec.scope == nil || rec.Throughput == nil || rec.Throughput.After != nil || rec.finished.IsZero() || rec.Status != StatusSucceeded {
		return
	}
	if c.Now.After(rec.finished) && c.Now.Sub(rec.finished) <= l.window {
		rec.after.add(rec.scope, l.samples[len(l.samples)-1])
	}
	if c.Now.Sub(rec.finished) >= l.window {
		rec.Throughput.After = rec.after.window()
		rec.after.latency = nil // the window is closed: its counts are no longer needed
		if rec.Throughput.After == nil {
			rec.Throughput.Detail = "no snapshot in the window after it finished"
			rec.scope = nil // nothing more to measure
		}
	}
}

// resolveLocked finds the key span of rec's operator on c, the first snapshot after it was recorded,
// and its load over the window before it started; for an entry restored with its window after open,
// the span only (that window starts again at the restore).
func (l *Log) resolveLocked(rec *record, c *model.Cluster) {
	rec.resolved = true
	if rec.reopened {
		if rec.scope = scopeOf(rec, c); rec.scope != nil {
			rec.Throughput.Detail = "the autopilot moved before the window after closed: that window starts when the next one took over"
		}
		return
	}
	if rec.Kind == "note" || rec.Throughput != nil {
		return // not a range operator, or restored with its throughput
	}
	rec.scope = scopeOf(rec, c)
	if rec.scope == nil {
		return
	}
	tp := &Throughput{Span: rec.scope.String()}
	var before loadSum
	for _, smp := range l.samples {
		if !smp.at.After(rec.Time) && rec.Time.Sub(smp.at) <= l.window {
			before.add(rec.scope, smp)
		}
	}
	if before.n == 0 {
		// No snapshot from before it started (the autopilot had just started): the load as it
		// started is the best there is.
		before.add(rec.scope, l.samples[len(l.samples)-1])
		tp.Detail = "no snapshot before it started: the load as it started"
	}
	tp.Before = before.window()
	rec.Throughput = tp
}

// scopeOf is the key span rec's operator changed, on c: the span its predicted benefit names, or its
// range's (nil when the range is not in c).
func scopeOf(rec *record, c *model.Cluster) *scope {
	switch rec.benefit.Metric {
	case operator.MetricSpanMaxQPS, operator.MetricSpanRanges:
		return &scope{start: rec.benefit.Start, end: rec.benefit.End}
	}
	r := c.Range(rec.Range)
	if r == nil {
		return nil
	}
	if r.System {
		return &scope{system: r.ID}
	}
	return &scope{start: r.StartKey, end: r.EndKey}
}

// String renders the scope for people.
func (sc *scope) String() string {
	if sc.system != 0 {
		return fmt.Sprintf("r%d (system range)", sc.system)
	}
	start, end := "−∞", "+∞"
	if len(sc.start) > 0 {
		start = model.FormatKey(sc.start)
	}
	if len(sc.end) > 0 {
		end = model.FormatKey(sc.end)
	}
	return "[" + start + ", " + end + ")"
}

// Restore loads entries saved by an earlier autopilot (it ran on another node, or before a restart),
// oldest first, ahead of anything recorded since. An entry that was still running is closed as
// stopped: the autopilot that ran it is gone. New IDs continue after the largest restored one.
func (l *Log) Restore(entries []Entry, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	current := l.ring
	l.ring, l.open = nil, nil
	l.byID = map[uint64]*record{}
	for _, e := range entries {
		if e.ID == 0 {
			continue
		}
		if e.Status == StatusRunning {
			e.Status = StatusStopped + ": the autopilot moved to another node while it ran"
		}
		if e.Measured != nil {
			m := *e.Measured
			e.Measured = &m
		}
		finished := e.Time
		if finished.IsZero() {
			finished = at
		}
		rec := &record{Entry: e, finished: finished}
		if e.Status == StatusSucceeded && e.Throughput != nil && e.Throughput.Before != nil && e.Throughput.After == nil {
			rec.finished, rec.reopened = at, true
		}
		l.push(rec)
		if e.ID >= l.nextID {
			l.nextID = e.ID + 1
		}
	}
	for _, rec := range current {
		if l.byID[rec.ID] == nil {
			l.push(rec)
		}
	}
	for _, rec := range l.ring {
		rec.Throughput = rec.Throughput.clone() // not shared with the caller's entries
	}
}

// Entries returns a copy of the log, oldest first.
func (l *Log) Entries() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Entry, len(l.ring))
	for i, rec := range l.ring {
		out[i] = rec.Entry
		if rec.Measured != nil {
			m := *rec.Measured
			out[i].Measured = &m
		}
		out[i].Notes = append([]string(nil), rec.Notes...)
		out[i].Steps = append([]StepTiming(nil), rec.Steps...)
		out[i].Throughput = rec.Throughput.clone()
	}
	return out
}

// Get returns the entry with id, if the log still holds it.
func (l *Log) Get(id uint64) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.byID[id]
	if rec == nil {
		return Entry{}, false
	}
	e := rec.Entry
	if rec.Measured != nil {
		m := *rec.Measured
		e.Measured = &m
	}
	e.Notes = append([]string(nil), rec.Notes...)
	e.Steps = append([]StepTiming(nil), rec.Steps...)
	e.Throughput = rec.Throughput.clone()
	return e, true
}

// clone is a deep copy of t (nil stays nil).
func (t *Throughput) clone() *Throughput {
	if t == nil {
		return nil
	}
	c := *t
	if t.Before != nil {
		b := *t.Before
		c.Before = &b
	}
	if t.After != nil {
		a := *t.After
		c.After = &a
	}
	return &c
}

// MarshalJSON renders the log as a JSON array of entries, oldest first.
func (l *Log) MarshalJSON() ([]byte, error) { return json.Marshal(l.Entries()) }
