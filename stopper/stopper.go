// Package stopper owns goroutines that run until their owner stops them: each gets a context that
// Stop cancels, and Stop returns only once every one has returned. It keeps no state of its own and
// never decides when to stop: its owner does.
package stopper

import (
	"context"
	"sync"
	"time"
)

// Stopper runs goroutines for one owner. The zero value is not usable; use New.
type Stopper struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// New returns a running stopper.
func New() *Stopper { return &Stopper{stop: make(chan struct{})} }

// Go runs f in a goroutine; f's context is cancelled by Stop.
func (s *Stopper) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := s.Context()
		defer cancel()
		f(ctx)
	}()
}

// Every runs f every d (the first time d from now) until Stop.
func (s *Stopper) Every(d time.Duration, f func(ctx context.Context)) {
	s.Go(func(ctx context.Context) {
		for s.Sleep(d) {
			f(ctx)
		}
	})
}

// Sleep waits d or until Stop; it reports false when stopping.
func (s *Stopper) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.stop:
		return false
	case <-t.C:
		return true
	}
}

// SleepContext sleeps d, or until ctx is done: then it returns ctx's error. For loops owned by a
// context rather than a Stopper (benchmarks, paced jobs).
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Context is a context cancelled by Stop; the caller must call cancel when done with it.
func (s *Stopper) Context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Stopping is closed once Stop is called.
func (s *Stopper) Stopping() <-chan struct{} { return s.stop }

// Stop cancels every goroutine's context and waits until all have returned. It may be called more
// than once.
func (s *Stopper) Stop() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}
