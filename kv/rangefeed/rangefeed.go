// Package rangefeed keeps the change streams of one node's replicas: every user range's applied
// changes (puts, deletes, expirations, splits and merges, at their raft index) in a bounded buffer
// per replica, and serves them to readers from a position, as RangeFeed streams.
//
// Every replica buffers, followers too, so that a reader whose node dies resumes on another replica
// from its last position. The buffers live in memory: a replica that restarts, installs a snapshot
// or evicts old changes holds positions only from there on, and a reader that asks for an older one
// gets ErrNotHeld (another replica may hold it; otherwise the reader re-reads and watches from now).
//
// It owns the buffers and the streams' framing. It is told what replicas apply (it is their
// replica.ChangeSink) and must never read the engine or call back into a replica: its methods run on
// the raft loop and must not block.
package rangefeed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Defaults of Config.
const (
	DefaultRangeBufferBytes   = 1 << 20
	DefaultNodeBufferBytes    = 64 << 20
	DefaultRetainRemoved      = 30 * time.Second
	DefaultCheckpointInterval = time.Second
)

// Config bounds the buffers. Zero values take the defaults above.
type Config struct {
	// Off: replicas report nothing and RangeFeed answers NOT_FOUND (the cost of change streams is
	// an event per change on every replica's apply, and the buffers' memory).
	Off bool `json:"off"`
	// RangeBufferBytes bounds one replica's buffered changes; NodeBufferBytes all of the node's: a
	// replica over either drops its oldest changes.
	RangeBufferBytes int64 `json:"range_buffer_bytes"`
	NodeBufferBytes  int64 `json:"node_buffer_bytes"`
	// RetainRemoved is how long the changes of a replica that left the node (moved or merged away)
	// stay for readers still draining them.
	RetainRemoved time.Duration `json:"retain_removed"`
	// CheckpointInterval: an idle stream tells its reader how far the replica has applied this often.
	CheckpointInterval time.Duration `json:"checkpoint_interval"`
}

// WithDefaults returns c with every zero field at its default.
func (c Config) WithDefaults() Config {
	if c.RangeBufferBytes == 0 {
		c.RangeBufferBytes = DefaultRangeBufferBytes
	}
	if c.NodeBufferBytes == 0 {
		c.NodeBufferBytes = DefaultNodeBufferBytes
	}
	if c.RetainRemoved == 0 {
		c.RetainRemoved = DefaultRetainRemoved
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.RangeBufferBytes < 0 || c.NodeBufferBytes < 0 || c.RetainRemoved < 0 || c.CheckpointInterval < 0 {
		return errors.New("change stream buffers, retention and checkpoint interval must not be negative")
	}
	return nil
}

var (
	// ErrNoReplica: this node has no replica of the range with data (the gRPC code is NOT_FOUND).
	ErrNoReplica = errors.New("no replica of the range on this node")
	// ErrNotHeld: the replica no longer (or not yet) holds the changes after the position asked
	// for (FAILED_PRECONDITION): another replica may; otherwise re-read the span and watch from now.
	ErrNotHeld = errors.New("position not held")
)

// eventOverhead is what an event costs beside its key and value, for the buffers' budgets.
const eventOverhead = 96

// minCheckpointGap spaces the checkpoints a stream sends as entries apply without changes for it.
const minCheckpointGap = 100 * time.Millisecond

// batchEvents bounds the events one wake-up of a stream sends.
const batchEvents = 256

// buffer is one replica's recent changes, oldest first, indexes non-decreasing.
type buffer struct {
	events []*pb.RangeFeedEvent
	bytes  int64
	// heldFrom: every change after it is in events (or still to come); none at or before it is.
	heldFrom uint64
	applied  uint64
	desc     *pb.RangeDescriptor // nil: the replica has no data yet
	// removedAt is when the replica left the node (zero while it is here).
	removedAt time.Time
	// wake is closed when anything changes, for the streams that wait on it.
	wake   chan struct{}
	waited bool
	// pins are the positions of the readers of this buffer (streams, initial scans): what they
	// have not read yet stays, up to pinnedLimit times the budgets.
	pins map[*Pin]struct{}
}

// pinnedLimit: a buffer keeps what its readers still need up to this many times its budgets; past
// that its oldest changes go anyway and a reader that needed them fails with ErrNotHeld.
const pinnedLimit = 8

// Pin holds a reader's position in a replica's buffer: changes after it are not evicted while the
// buffers are within pinnedLimit times their budgets.
type Pin struct {
	g       *Registry
	rangeID uint64
	b       *buffer
	pos     uint64
}

// Release lets the buffer drop what the pin held.
func (p *Pin) Release() {
	if p == nil {
		return
	}
	p.g.mu.Lock()
	delete(p.b.pins, p)
	p.g.mu.Unlock()
}

// PinAt pins range rangeID's buffer at index, the position of a reader that will read the changes
// after it (an initial scan at that index). The caller must hold off the replica's applies (call it
// where the index was read, under the replica's lock), so that nothing after index is evicted first.
func (g *Registry) PinAt(rangeID, index uint64) (*Pin, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buffers[rangeID]
	if b == nil || b.desc == nil {
		return nil, fmt.Errorf("range %d: %w", rangeID, ErrNoReplica)
	}
	if index < b.heldFrom {
		return nil, fmt.Errorf("range %d: changes after index %d asked for, this replica holds them after %d: %w", rangeID, index, b.heldFrom, ErrNotHeld)
	}
	p := &Pin{g: g, rangeID: rangeID, b: b, pos: index}
	if b.pins == nil {
		b.pins = map[*Pin]struct{}{}
	}
	b.pins[p] = struct{}{}
	return p, nil
}

// pinnedLocked reports whether a reader still needs the changes at index.
func (b *buffer) pinnedLocked(index uint64) bool {
	for p := range b.pins {
		if p.pos < index {
			return true
		}
	}
	return false
}

func (b *buffer) notify() {
	if b.waited {
		close(b.wake)
		b.wake, b.waited = make(chan struct{}), false
	}
}

// Registry holds the buffers of one node's replicas. It implements replica.ChangeSink.
type Registry struct {
	cfg Config

	mu      sync.Mutex
	buffers map[uint64]*buffer
	total   int64
	swept   time.Time
}

// New returns an empty registry.
func New(cfg Config) *Registry {
	return &Registry{cfg: cfg.WithDefaults(), buffers: map[uint64]*buffer{}}
}

func (g *Registry) bufferLocked(rangeID uint64) *buffer {
	b := g.buffers[rangeID]
	if b == nil {
		b = &buffer{wake: make(chan struct{})}
		g.buffers[rangeID] = b
	}
	return b
}

func eventBytes(ev *pb.RangeFeedEvent) int64 { return int64(len(ev.Key)+len(ev.Value)) + eventOverhead }

// Applied appends a replica's applied changes (replica.ChangeSink).
func (g *Registry) Applied(rangeID uint64, events []*pb.RangeFeedEvent, applied uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.bufferLocked(rangeID)
	if len(events) == 0 && applied == b.applied {
		return
	}
	for _, ev := range events {
		b.events = append(b.events, ev)
		n := eventBytes(ev)
		b.bytes += n
		g.total += n
		switch ev.Kind {
		case pb.RangeFeedEvent_SPLIT, pb.RangeFeedEvent_MERGE:
			b.desc = ev.Desc
		}
	}
	b.applied = max(b.applied, applied)
	for len(b.events) > 0 && b.bytes > g.cfg.RangeBufferBytes {
		if b.bytes <= pinnedLimit*g.cfg.RangeBufferBytes && b.pinnedLocked(b.events[0].Index) {
			break
		}
		g.evictOldestLocked(b)
	}
	if g.total > g.cfg.NodeBufferBytes {
		g.shrinkLocked()
	}
	b.notify()
	g.sweepLocked(time.Now())
}

// shrinkLocked brings the node's buffers back within NodeBufferBytes, taking from the largest
// first (not the one that grew last: a busy range would lose its window while idle ones keep theirs).
func (g *Registry) shrinkLocked() {
	overHard := g.total > pinnedLimit*g.cfg.NodeBufferBytes
	for g.total > g.cfg.NodeBufferBytes {
		var largest *buffer
		for _, b := range g.buffers {
			if len(b.events) > 0 && (overHard || !b.pinnedLocked(b.events[0].Index)) && (largest == nil || b.bytes > largest.bytes) {
				largest = b
			}
		}
		if largest == nil {
			return // what is left, readers still need
		}
		g.evictOldestLocked(largest)
	}
}

// evictOldestLocked drops b's oldest index, all its events at once: a position is an index, so an
// index is held whole or not at all.
func (g *Registry) evictOldestLocked(b *buffer) {
	idx := b.events[0].Index
	i := 0
	for ; i < len(b.events) && b.events[i].Index == idx; i++ {
		n := eventBytes(b.events[i])
		b.bytes -= n
		g.total -= n
		b.events[i] = nil
	}
	b.events = b.events[i:]
	b.heldFrom = max(b.heldFrom, idx)
}

// Reset starts a replica's history afresh (replica.ChangeSink).
func (g *Registry) Reset(rangeID uint64, desc *pb.RangeDescriptor, index, heldFrom uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.bufferLocked(rangeID)
	g.total -= b.bytes
	b.events, b.bytes = nil, 0
	b.heldFrom, b.applied, b.desc, b.removedAt = heldFrom, index, desc, time.Time{}
	b.notify()
}

// Removed marks a replica gone; its changes stay for RetainRemoved (replica.ChangeSink).
func (g *Registry) Removed(rangeID uint64, desc *pb.RangeDescriptor) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buffers[rangeID]
	if b == nil {
		return
	}
	if desc != nil {
		b.desc = desc
	}
	b.removedAt = time.Now()
	b.notify()
}

// sweepLocked drops the buffers of replicas removed longer than RetainRemoved ago (at most once a
// second: it walks every buffer).
func (g *Registry) sweepLocked(now time.Time) {
	if now.Sub(g.swept) < time.Second {
		return
	}
	g.swept = now
	for id, b := range g.buffers {
		if !b.removedAt.IsZero() && now.Sub(b.removedAt) > g.cfg.RetainRemoved {
			g.total -= b.bytes
			delete(g.buffers, id)
			b.notify()
		}
	}
}

// Stats is what the buffers hold.
type Stats struct {
	Buffers int
	Events  int
	Bytes   int64
}

// Stats reads the buffers' sizes.
func (g *Registry) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := Stats{Buffers: len(g.buffers), Bytes: g.total}
	for _, b := range g.buffers {
		st.Events += len(b.events)
	}
	return st
}

// inSpan reports whether key is in [start, end) (empty end: no bound).
func inSpan(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// Serve streams range req.RangeId's changes after req.FromIndex (0: from what the replica applied)
// that fall in the request's span, until ctx ends, a SPLIT or MERGE ends the range's span (the
// event is sent, then Serve returns nil) or the replica leaves the node (a REMOVED event, then nil).
// Changes of the whole index are sent or none; when idle, a CHECKPOINT says how far the replica
// applied.
func (g *Registry) Serve(ctx context.Context, req *pb.RangeFeedRequest, send func(*pb.RangeFeedEvent) error) error {
	return g.ServePinned(ctx, nil, req, SendFunc(send))
}

// Sink is where a stream's events go: Send may keep them, Flush (called before the stream waits or
// ends) must send what it kept.
type Sink interface {
	Send(*pb.RangeFeedEvent) error
	Flush() error
}

// SendFunc is a Sink that sends each event at once.
type SendFunc func(*pb.RangeFeedEvent) error

// Send implements Sink.
func (f SendFunc) Send(ev *pb.RangeFeedEvent) error { return f(ev) }

// Flush implements Sink.
func (SendFunc) Flush() error { return nil }

// ServePinned is Serve for a reader pinned at req.FromIndex already (PinAt, nil for none), into out;
// it releases the pin.
func (g *Registry) ServePinned(ctx context.Context, pin *Pin, req *pb.RangeFeedRequest, out Sink) (err error) {
	defer func() {
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
	}()
	b, pos, pin, err := g.start(pin, req)
	defer func() { pin.Release() }() // nil-safe: start failed before it pinned
	if err != nil {
		return err
	}
	st := &stream{g: g, req: req, out: out, b: b, pin: pin, pos: pos, sentPos: pos, lastCheckpoint: time.Now()}
	if err := st.checkpoint(pos); err != nil {
		return err
	}
	tick := time.NewTicker(g.cfg.CheckpointInterval)
	defer tick.Stop()
	for {
		wait, applied, done, err := st.sendNext()
		if done || err != nil {
			return err
		}
		if !wait {
			continue
		}
		var soon <-chan time.Time // the checkpoint owed once the gap since the last has passed
		if applied > st.sentPos && time.Since(st.lastCheckpoint) < minCheckpointGap {
			soon = time.After(minCheckpointGap - time.Since(st.lastCheckpoint))
		}
		if applied > st.sentPos && soon == nil {
			// Entries applied with nothing for this reader (a fence, another span's writes), and
			// every change up to applied was collected: say so now, not at the next tick, so that a
			// reader waiting for an index sees it pass.
			if err := st.checkpoint(applied); err != nil {
				return err
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.wake:
		case <-soon:
		case <-tick.C:
			if applied > st.sentPos {
				if err := st.checkpoint(applied); err != nil {
					return err
				}
			}
		}
	}
}

// start finds req's buffer and starting position, and pins the position unless pin does already.
func (g *Registry) start(pin *Pin, req *pb.RangeFeedRequest) (*buffer, uint64, *Pin, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pos := req.FromIndex
	b := g.buffers[req.RangeId]
	if b == nil || b.desc == nil {
		return nil, 0, pin, fmt.Errorf("range %d: %w", req.RangeId, ErrNoReplica)
	}
	switch {
	case req.AfterMergeOf != 0:
		at := mergeIndex(b.events, req.AfterMergeOf)
		if at == 0 {
			return nil, 0, pin, fmt.Errorf("range %d: no merge of range %d among its buffered changes: %w", req.RangeId, req.AfterMergeOf, ErrNotHeld)
		}
		pos = at
	case pos == 0:
		pos = b.applied
	}
	if pin == nil {
		if pos < b.heldFrom {
			return nil, 0, nil, fmt.Errorf("range %d: changes after index %d asked for, this replica holds them after %d: %w", req.RangeId, pos, b.heldFrom, ErrNotHeld)
		}
		pin = &Pin{g: g, rangeID: req.RangeId, b: b, pos: pos}
		if b.pins == nil {
			b.pins = map[*Pin]struct{}{}
		}
		b.pins[pin] = struct{}{}
	}
	return b, pos, pin, nil
}

// stream is one RangeFeed reader's state.
type stream struct {
	g              *Registry
	req            *pb.RangeFeedRequest
	out            Sink
	b              *buffer
	pin            *Pin
	pos, sentPos   uint64 // read through; told the reader through
	lastCheckpoint time.Time
	wake           chan struct{}
}

// checkpoint tells the reader that everything through index (≥ its position) was sent.
func (st *stream) checkpoint(index uint64) error {
	st.pos = max(st.pos, index)
	if err := st.out.Send(&pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_CHECKPOINT, RangeId: st.req.RangeId, Index: st.pos}); err != nil {
		return err
	}
	st.sentPos, st.lastCheckpoint = st.pos, time.Now()
	return nil
}

// sendNext sends the buffered changes after the reader's position. wait: there is nothing more
// now (applied is how far the replica applied when that was seen, st.wake what to wait on); done:
// the stream ended (a SPLIT or MERGE was sent, or the replica left).
func (st *stream) sendNext() (wait bool, applied uint64, done bool, err error) {
	g, b, req := st.g, st.b, st.req
	g.mu.Lock()
	if g.buffers[req.RangeId] != b {
		g.mu.Unlock()
		return false, 0, true, fmt.Errorf("range %d: the replica's buffer was dropped (removed %s ago): %w", req.RangeId, g.cfg.RetainRemoved, ErrNotHeld)
	}
	if st.pos < b.heldFrom {
		held := b.heldFrom
		g.mu.Unlock()
		return false, 0, true, fmt.Errorf("range %d: changes after index %d asked for, this replica holds them after %d: %w", req.RangeId, st.pos, held, ErrNotHeld)
	}
	st.pin.pos = st.pos // what this reader has read: the buffer may drop it
	batch, last, ends := collect(b.events, st.pos, req.StartKey, req.EndKey)
	applied, removed, desc := b.applied, !b.removedAt.IsZero(), b.desc
	st.wake = b.wake
	if len(batch) == 0 && last == st.pos {
		b.waited = true
	}
	g.mu.Unlock()
	for _, ev := range batch {
		if err := st.out.Send(ev); err != nil {
			return false, 0, true, err
		}
	}
	switch {
	case ends:
		return false, 0, true, nil
	case last > st.pos:
		st.pos = last
		if len(batch) > 0 {
			st.sentPos = last
		}
		return false, 0, false, nil
	case removed:
		return false, 0, true, st.out.Send(&pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_REMOVED, RangeId: req.RangeId, Index: st.pos, Desc: desc})
	}
	return true, applied, false, nil
}

// mergeIndex is the index of the MERGE event that absorbed range right, 0 if events hold none.
func mergeIndex(events []*pb.RangeFeedEvent, right uint64) uint64 {
	for _, ev := range events {
		if ev.Kind == pb.RangeFeedEvent_MERGE && ev.Right.GetRangeId() == right {
			return ev.Index
		}
	}
	return 0
}

// collect returns the events after pos in [start, end), whole indexes only and about batchEvents of
// them, the last index it looked at, and whether a SPLIT or MERGE (which it returns last) ends the
// stream.
func collect(events []*pb.RangeFeedEvent, pos uint64, start, end []byte) (out []*pb.RangeFeedEvent, last uint64, ends bool) {
	i := sort.Search(len(events), func(i int) bool { return events[i].Index > pos })
	last = pos
	for ; i < len(events); i++ {
		ev := events[i]
		if ev.Index != last && len(out) >= batchEvents {
			break
		}
		last = ev.Index
		switch ev.Kind {
		case pb.RangeFeedEvent_SPLIT, pb.RangeFeedEvent_MERGE:
			return append(out, ev), last, true
		}
		if inSpan(ev.Key, start, end) {
			out = append(out, ev)
		}
	}
	return out, last, false
}
