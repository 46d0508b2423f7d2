package logpipe

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage"
)

// env is a pipeline on a real engine whose waiters are the keys a batch wrote, delivered in order.
type env struct {
	t       *testing.T
	eng     *storage.Engine
	p       *Pipe[[]string]
	stopped chan struct{}
	fatal   atomic.Value

	mu        sync.Mutex
	delivered [][]string
	// seen: whether each delivered key was readable from the engine when its batch was delivered.
	seen []bool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, eng: eng, stopped: make(chan struct{})}
	e.p = New(Config[[]string]{
		NewBatch: eng.NewIndexedBatch,
		Deliver:  e.deliver,
		Fatal:    func(err error) { e.fatal.Store(err) },
		Stopped:  e.stopped,
	})
	t.Cleanup(func() {
		select {
		case <-e.stopped:
		default:
			close(e.stopped)
		}
		eng.Close()
	})
	return e
}

func (e *env) deliver(w *Write[[]string]) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivered = append(e.delivered, w.Waiters)
	for _, k := range w.Waiters {
		_, found, err := e.eng.Get([]byte(k))
		e.seen = append(e.seen, found && err == nil)
	}
}

// collect runs one collect phase that writes keys into the open batch.
func (e *env) collect(sync bool, keys ...string) bool {
	e.p.BeginCollect()
	w := e.p.Open()
	for _, k := range keys {
		if err := w.Batch.Set([]byte(k), []byte("v")); err != nil {
			e.t.Fatal(err)
		}
		w.Waiters = append(w.Waiters, k)
	}
	w.Sync = w.Sync || sync
	return e.p.EndCollect()
}

func (e *env) deliveries() ([][]string, []bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]string(nil), e.delivered...), append([]bool(nil), e.seen...)
}

// Without a writer goroutine each collect phase is one step: its batch is committed, then its
// waiters delivered, before EndCollect returns; only batches that must survive a crash are synced.
func TestStepWithoutWriter(t *testing.T) {
	e := newEnv(t)
	if !e.collect(true, "a", "b") || !e.collect(false, "c") {
		t.Fatal("EndCollect failed")
	}
	got, seen := e.deliveries()
	if len(got) != 2 || len(got[0]) != 2 || got[1][0] != "c" {
		t.Fatalf("delivered %v, want [[a b] [c]]", got)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("key %d delivered before its batch was committed", i)
		}
	}
	if n := e.p.Syncs(); n != 1 {
		t.Errorf("%d synced commits, want 1 (the batch of commit indexes alone needs none)", n)
	}
	if !e.p.Flush() {
		t.Error("Flush with nothing open failed")
	}
}

// With the writer running, the open batch is left alone during a collect phase (one cycle's
// appends share one commit), batches are delivered in the order they were filled (phases that end
// while the writer is busy share its next batch), and Flush
// returns only once everything collected so far is committed.
func TestWriterCommitsInOrder(t *testing.T) {
	e := newEnv(t)
	e.p.Start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.p.Run()
	}()

	e.p.BeginCollect()
	w := e.p.Open()
	_ = w.Batch.Set([]byte("x"), []byte("v"))
	w.Waiters = append(w.Waiters, "x")
	e.p.wakeWriter()
	time.Sleep(20 * time.Millisecond)
	if got, _ := e.deliveries(); len(got) != 0 {
		t.Fatalf("the writer took the open batch during a collect phase: %v", got)
	}
	_ = w.Batch.Set([]byte("y"), []byte("v"))
	w.Waiters = append(w.Waiters, "y")
	if !e.p.EndCollect() {
		t.Fatal("EndCollect failed")
	}
	for i := 0; i < 20; i++ {
		if !e.collect(i%2 == 0, string(rune('a'+i))) {
			t.Fatal("EndCollect failed")
		}
	}
	if !e.p.Flush() {
		t.Fatal("Flush failed")
	}
	got, seen := e.deliveries()
	var keys []string
	for _, ks := range got {
		keys = append(keys, ks...)
	}
	// Later collect phases may join one batch (group commit), but x and y must share the first.
	if len(keys) != 22 || len(got[0]) < 2 || got[0][0] != "x" || got[0][1] != "y" {
		t.Fatalf("delivered %v: want x and y in the first batch, then a..t", got)
	}
	for i := 2; i < len(keys); i++ {
		if want := string(rune('a' + i - 2)); keys[i] != want {
			t.Fatalf("delivery %d is %q, want %q (out of order)", i, keys[i], want)
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("key %q delivered before its batch was committed", keys[i])
		}
	}
	close(e.stopped)
	<-done
	if !e.collect(true, "late") {
		t.Fatal("EndCollect after stop")
	}
	if e.p.Flush() {
		t.Error("Flush after the node stopped reported the batch committed")
	}
	if err := e.fatal.Load(); err != nil {
		t.Errorf("fatal: %v", err)
	}
}

// An aborted collect phase drops its batch: nothing of it reaches the engine or its waiters.
func TestAbortDropsBatch(t *testing.T) {
	e := newEnv(t)
	e.p.BeginCollect()
	w := e.p.Open()
	_ = w.Batch.Set([]byte("gone"), []byte("v"))
	w.Waiters = append(w.Waiters, "gone")
	e.p.AbortCollect()
	if !e.collect(false, "kept") {
		t.Fatal("EndCollect failed")
	}
	got, _ := e.deliveries()
	if len(got) != 1 || got[0][0] != "kept" {
		t.Fatalf("delivered %v, want only [kept]", got)
	}
	if _, found, _ := e.eng.Get([]byte("gone")); found {
		t.Error("the aborted batch reached the engine")
	}
}
