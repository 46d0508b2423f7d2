// Package logpipe is a node's raft log pipeline: the open batch the raft loop fills with every
// range's log appends of a cycle, and the writer goroutine that commits those batches in order, one
// fsync per batch for all ranges (group commit), and then hands each batch's waiters to its owner.
//
// It owns the order of commits and the hand-off between the loop and the writer, nothing else: what
// a batch holds and who waits for it belong to the owner (package replica). It must never take a
// replica's lock or step raft (the owner's deliver callback does that without a replica lock), so
// the loop may wait for the writer (Flush) while holding one.
//
// Invariants:
//   - Batches are committed in the order the loop filled them (one writer), so a range's appends
//     reach the engine in raft's order, and a synced batch makes every earlier one durable too.
//   - A batch's waiters are delivered only after the batch is committed, synced when it had to be.
//   - The writer takes the open batch only between the loop's collect phases: one cycle's appends
//     are never split across two fsyncs.
//
// Without Start (tests, fuzzing) there is no writer goroutine: EndCollect and Flush commit the open
// batch in the caller's goroutine, so each loop cycle is one deterministic step.
package logpipe

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/storage"
)

// Write is one batch of the pipeline and what waits for it (P, the owner's).
type Write[P any] struct {
	Batch *storage.Batch
	// Sync: some append in the batch must survive a crash (entries, a term or a vote, a snapshot).
	// A batch of commit indexes alone may be lost and relearned, so it is committed without fsync.
	Sync    bool
	Waiters P
	done    chan struct{} // closed once committed (never, if the commit fails: the node stops)
}

// Config is what the pipeline needs from its owner.
type Config[P any] struct {
	NewBatch func() *storage.Batch
	// Deliver hands a committed batch's waiters on. It runs in the committing goroutine and must
	// take no replica lock.
	Deliver func(*Write[P])
	// Fatal is told of a failed commit; the node must stop (a batch half-known to raft cannot be
	// retried).
	Fatal func(error)
	// Stopped is closed when the node stops: the writer returns and Flush gives up.
	Stopped <-chan struct{}
	// CommitSince, if set, holds the unix nanos at which the current commit began (0 when none
	// runs), for the owner's stall watchdog.
	CommitSince *atomic.Int64
}

// Pipe is the pipeline.
type Pipe[P any] struct {
	cfg  Config[P]
	kick chan struct{}

	mu         sync.Mutex // guards the fields below
	pipelined  bool       // Start ran: the writer goroutine commits the loop's batches
	collecting bool       // the loop is in its collect phase: the writer leaves the open batch alone
	open       *Write[P]  // being filled by the loop
	inflight   *Write[P]  // being committed by the writer

	syncs atomic.Uint64
}

// New returns a pipeline without a writer goroutine (see Start).
func New[P any](cfg Config[P]) *Pipe[P] {
	if cfg.CommitSince == nil {
		cfg.CommitSince = new(atomic.Int64)
	}
	return &Pipe[P]{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Start makes batches go to the writer goroutine, which the caller runs with Run.
func (p *Pipe[P]) Start() {
	p.mu.Lock()
	p.pipelined = true
	p.mu.Unlock()
}

// Syncs is how many batches were committed with an fsync.
func (p *Pipe[P]) Syncs() uint64 { return p.syncs.Load() }

// Open returns the batch the loop is filling, starting one if needed. Only the loop calls it, during
// its collect phase (the writer does not take the open batch then).
func (p *Pipe[P]) Open() *Write[P] {
	if p.open == nil {
		w := &Write[P]{Batch: p.cfg.NewBatch(), done: make(chan struct{})}
		p.mu.Lock()
		p.open = w
		p.mu.Unlock()
	}
	return p.open
}

// BeginCollect and EndCollect bracket the loop's collect phase. EndCollect hands the open batch on:
// to the writer goroutine, or, without one, commits it at once. False: the commit failed.
func (p *Pipe[P]) BeginCollect() {
	p.mu.Lock()
	p.collecting = true
	p.mu.Unlock()
}

// EndCollect: see BeginCollect.
func (p *Pipe[P]) EndCollect() bool {
	p.mu.Lock()
	p.collecting = false
	w := p.open
	if w != nil && !p.pipelined {
		p.open = nil
	}
	p.mu.Unlock()
	if w == nil {
		return true
	}
	if !p.pipelined {
		return p.commit(w)
	}
	p.wakeWriter()
	return true
}

// AbortCollect ends a collect phase that failed (the node is stopping): the open batch is dropped
// uncommitted, and nothing waiting for it will see it done.
func (p *Pipe[P]) AbortCollect() {
	p.mu.Lock()
	p.collecting = false
	w := p.open
	p.open = nil
	p.mu.Unlock()
	if w != nil {
		w.Batch.Close()
	}
}

// Flush waits until everything the loop has written so far is committed. It may be called with
// replica locks held (the writer takes none); false: the node stopped or the commit failed.
func (p *Pipe[P]) Flush() bool {
	p.mu.Lock()
	w := p.open
	if !p.pipelined {
		// No writer goroutine: the caller is the loop's own, which commits its batch itself.
		p.open = nil
		p.mu.Unlock()
		return w == nil || p.commit(w)
	}
	if w == nil {
		w = p.inflight
	}
	p.mu.Unlock()
	if w == nil {
		return true
	}
	p.wakeWriter()
	select {
	case <-w.done:
		return true
	case <-p.cfg.Stopped:
		return false
	}
}

func (p *Pipe[P]) wakeWriter() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run is the writer goroutine: it commits each batch the loop hands on, in order, until the node
// stops or a commit fails.
func (p *Pipe[P]) Run() {
	for {
		select {
		case <-p.cfg.Stopped:
			return
		case <-p.kick:
		}
		for {
			select {
			case <-p.cfg.Stopped:
				return
			default:
			}
			p.mu.Lock()
			w := p.open
			if w == nil || p.collecting {
				p.mu.Unlock()
				break
			}
			p.open, p.inflight = nil, w
			p.mu.Unlock()
			ok := p.commit(w)
			p.mu.Lock()
			p.inflight = nil
			p.mu.Unlock()
			if !ok {
				return
			}
		}
	}
}

// commit commits w and delivers its waiters. False: the commit failed (Fatal was told).
func (p *Pipe[P]) commit(w *Write[P]) bool {
	if !w.Batch.Empty() {
		p.cfg.CommitSince.Store(time.Now().UnixNano())
		err := w.Batch.Commit(w.Sync)
		p.cfg.CommitSince.Store(0)
		if err != nil {
			w.Batch.Close()
			p.cfg.Fatal(fmt.Errorf("commit raft batch: %w", err))
			return false
		}
		if w.Sync {
			p.syncs.Add(1)
		}
	}
	w.Batch.Close()
	p.cfg.Deliver(w)
	close(w.done)
	return true
}
