package stopper

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Stop cancels what runs, waits for it, and ends Every's and Sleep's waits at once.
func TestStopEndsEverything(t *testing.T) {
	s := New()
	var ticks, cancelled atomic.Int32
	s.Every(time.Millisecond, func(context.Context) { ticks.Add(1) })
	s.Go(func(ctx context.Context) {
		<-ctx.Done()
		cancelled.Add(1)
	})
	for ticks.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	s.Stop()
	s.Stop() // a second Stop is harmless
	if cancelled.Load() != 1 {
		t.Fatal("Go's context was not cancelled before Stop returned")
	}
	n := ticks.Load()
	time.Sleep(5 * time.Millisecond)
	if ticks.Load() != n {
		t.Fatal("Every ran after Stop returned")
	}
	if s.Sleep(time.Hour) {
		t.Fatal("Sleep after Stop waited")
	}
	// Far from the hour Sleep was asked for, however slowly the host runs.
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("Stop took %v", took)
	}
	select {
	case <-s.Stopping():
	default:
		t.Fatal("Stopping not closed after Stop")
	}
}

// SleepContext ends at its duration, or at once with the context's error when it is done.
func TestSleepContext(t *testing.T) {
	if err := SleepContext(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a full sleep returned %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepContext(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("a sleep under a cancelled context returned %v, want context.Canceled", err)
	}
	if err := SleepContext(ctx, 0); err != context.Canceled {
		t.Fatalf("a zero sleep under a cancelled context returned %v", err)
	}
}
