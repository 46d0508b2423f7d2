package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/storage"
)

// gatedFS holds every sync of the engine's WAL until the test lets it pass: the test then knows
// which writes are behind which fsync.
type gatedFS struct {
	vfs.FS
	mu      sync.Mutex
	cond    *sync.Cond
	held    bool
	permits int
	waiting atomic.Int32
}

func newGatedFS() *gatedFS {
	g := &gatedFS{FS: vfs.NewMem()}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// hold makes WAL syncs wait; allow(n) lets n of them through; release lets every one through.
func (g *gatedFS) hold() {
	g.mu.Lock()
	g.held, g.permits = true, 0
	g.mu.Unlock()
}

func (g *gatedFS) allow(n int) {
	g.mu.Lock()
	g.permits += n
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gatedFS) release() {
	g.mu.Lock()
	g.held = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gatedFS) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	for g.held && g.permits == 0 {
		g.cond.Wait()
	}
	if g.held {
		g.permits--
	}
}

func (g *gatedFS) wrap(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, g: g}, nil
}

func (g *gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(f, err, name)
}

func (g *gatedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(f, err, newname)
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f *gatedFile) Sync() error {
	f.g.pass()
	return f.File.Sync()
}

func (f *gatedFile) SyncData() error {
	f.g.pass()
	return f.File.SyncData()
}

func (f *gatedFile) SyncTo(n int64) (bool, error) {
	f.g.pass()
	return f.File.SyncTo(n)
}

// startGated starts a one-node store on a gated engine, holding range 2 = [, ∞) as its leader.
func startGated(t *testing.T) (*Store, *Replica, *gatedFS) {
	t.Helper()
	g := newGatedFS()
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true, FS: g, CacheBytes: 1 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	cfg := Config{NodeID: 1, Engine: eng, Transport: &fakeTransport{}, TickInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := NewStore(cfg).Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := NewStore(cfg)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		g.release()
		s.Stop()
	})
	r := s.Replica(FirstUserRangeID)
	lead(t, r)
	if _, err := r.Propose(context.Background(), putCmd("warm", "up")); err != nil {
		t.Fatal(err)
	}
	return s, r, g
}

// proposeAsync proposes a put and returns where its outcome arrives.
func proposeAsync(r *Replica, k string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := r.Propose(context.Background(), putCmd(k, "v"))
		ch <- err
	}()
	return ch
}

// TestLogPipelineGroupsProposalsDuringFsync: writes proposed while the log writer syncs one batch
// are all collected into the next batch, which one fsync makes durable.
func TestLogPipelineGroupsProposalsDuringFsync(t *testing.T) {
	s, r, g := startGated(t)
	g.hold()
	entries0 := s.entriesWritten.Load()
	a := proposeAsync(r, "a")
	waitFor(t, "the first write's fsync to start", func() bool { return g.waiting.Load() > 0 })
	syncs0 := s.log.Syncs()
	var rest []<-chan error
	for i := 0; i < 5; i++ {
		rest = append(rest, proposeAsync(r, fmt.Sprintf("b%d", i)))
	}
	waitFor(t, "the loop to collect every write", func() bool { return s.entriesWritten.Load() == entries0+6 })
	g.release()
	for _, ch := range append(rest, a) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// The first write's batch is counted once its fsync returns: one more for the five others.
	if got := s.log.Syncs() - syncs0; got != 2 {
		t.Fatalf("one write and the five that arrived during its fsync took %d fsyncs, want 2", got)
	}
}

// TestLogPipelineAppliesWithoutUnrelatedFsync: a write whose entry is durable is applied and
// answered while the fsync of a later write is still under way.
func TestLogPipelineAppliesWithoutUnrelatedFsync(t *testing.T) {
	s, r, g := startGated(t)
	g.hold()
	entries0 := s.entriesWritten.Load()
	a := proposeAsync(r, "a")
	waitFor(t, "the first write's fsync to start", func() bool { return g.waiting.Load() > 0 })
	b := proposeAsync(r, "b")
	waitFor(t, "the loop to collect the second write", func() bool { return s.entriesWritten.Load() == entries0+2 })
	g.allow(1) // the first write's fsync only
	select {
	case err := <-a:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first write waited for the second write's fsync")
	}
	select {
	case err := <-b:
		t.Fatalf("the second write was answered (%v) before its entry was durable", err)
	default:
	}
	if v, ok, err := r.Get([]byte("a")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("a after its answer: %q %v %v", v, ok, err)
	}
	g.release()
	if err := <-b; err != nil {
		t.Fatal(err)
	}
}

// TestLoadAppliedAboveCommit: the applied index is written with the apply, the commit index with a
// later log batch; a crash in between leaves applied above the persisted commit index, and the
// replica must load (raft refuses an applied index above its commit index).
func TestLoadAppliedAboveCommit(t *testing.T) {
	env := newStoreEnv(t)
	if err := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr}).Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := env.start(time.Hour)
	r := s.Replica(FirstUserRangeID)
	lead(t, r)
	for i := 0; i < 3; i++ {
		if _, err := r.Propose(context.Background(), putCmd(fmt.Sprintf("k%d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	applied := r.Applied()
	s.Stop()
	hs := &raftpb.HardState{}
	v, _, err := env.eng.Get(storage.HardStateKey(FirstUserRangeID))
	if err != nil || proto.Unmarshal(v, hs) != nil {
		t.Fatalf("hard state: %v", err)
	}
	hs.Commit = proto.Uint64(applied - 2)
	b := env.eng.NewBatch()
	data, _ := proto.Marshal(hs)
	if err := b.Set(storage.HardStateKey(FirstUserRangeID), data); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	s2 := env.start(time.Hour)
	r2 := s2.Replica(FirstUserRangeID)
	lead(t, r2)
	if _, err := r2.Propose(context.Background(), putCmd("after", "restart")); err != nil {
		t.Fatal(err)
	}
	if got := r2.Applied(); got <= applied {
		t.Fatalf("applied %d after a write past %d", got, applied)
	}
}
