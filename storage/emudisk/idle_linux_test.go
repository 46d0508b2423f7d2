package emudisk

import (
	"runtime"
	"sync"
	"testing"
)

// TestMarkIdleThread: operations charged on a thread MarkIdle marked are idle-class until undo, marks
// nest, and another goroutine's operations meanwhile stay the foreground's.
func TestMarkIdleThread(t *testing.T) {
	d := NewDevice(Options{ReadBytesPerSec: 1 << 30}, newFakeClock(true))
	var wg sync.WaitGroup
	marked, other := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		undo := d.MarkIdle()
		inner := d.MarkIdle()
		d.charge(opRead, 4096)
		inner()
		d.charge(opRead, 4096) // still marked by the outer mark
		close(marked)
		<-other
		undo()
		d.charge(opRead, 4096)
	}()
	<-marked
	d.charge(opRead, 4096) // another goroutine: never on the locked thread
	close(other)
	wg.Wait()
	if st := d.Stats(); st.IdleOps != 2 || st.ReadOps != 4 {
		t.Fatalf("stats %+v: want 2 idle of 4 reads", st)
	}
	if d.idleMarked.Load() != 0 || len(d.idle.m) != 0 {
		t.Fatalf("marks left: %d, %v", d.idleMarked.Load(), d.idle.m)
	}
}
