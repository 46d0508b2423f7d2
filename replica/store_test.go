package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/shoaldb/shoal/admission"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/raftlog"
	"github.com/shoaldb/shoal/replica/internal/snapstream"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
	"github.com/shoaldb/shoal/transport"
)

// fakeTransport records what the store sends; nothing is delivered.
type fakeTransport struct {
	mu      sync.Mutex
	sent    []*pb.RaftMessage
	snaps   []*pb.RaftMessage
	snapKVs [][]*pb.KeyValue
}

func (f *fakeTransport) Send(msg *pb.RaftMessage) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, proto.Clone(msg).(*pb.RaftMessage))
	return true
}

// SendSnapshot drains src, closes it (as the real transport does) and records the header and pairs.
func (f *fakeTransport) SendSnapshot(ctx context.Context, header *pb.RaftMessage, src transport.SnapshotSource) error {
	defer src.Close()
	var kvs []*pb.KeyValue
	for {
		kv, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		kvs = append(kvs, kv)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snaps = append(f.snaps, proto.Clone(header).(*pb.RaftMessage))
	f.snapKVs = append(f.snapKVs, kvs)
	return nil
}

func (f *fakeTransport) snapshots() ([]*pb.RaftMessage, [][]*pb.KeyValue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.RaftMessage(nil), f.snaps...), append([][]*pb.KeyValue(nil), f.snapKVs...)
}

func (f *fakeTransport) messages() []*pb.RaftMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.RaftMessage(nil), f.sent...)
}

var _ Transport = (*fakeTransport)(nil)

type storeEnv struct {
	t   *testing.T
	eng *storage.Engine
	tr  *fakeTransport
}

func newStoreEnv(t *testing.T) *storeEnv {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() }) // runs after every store's Stop (cleanups are LIFO)
	return &storeEnv{t: t, eng: eng, tr: &fakeTransport{}}
}

// start creates a store for node 1 on the env's engine, loads it and starts its loop.
func (env *storeEnv) start(tick time.Duration) *Store {
	env.t.Helper()
	return env.startWith(Config{TickInterval: tick})
}

// startWith is start with more configuration; node, engine, transport and logger are filled in.
func (env *storeEnv) startWith(cfg Config) *Store {
	env.t.Helper()
	cfg.NodeID, cfg.Engine, cfg.Transport = 1, env.eng, env.tr
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewStore(cfg)
	if err := s.Load(); err != nil {
		env.t.Fatalf("Load: %v", err)
	}
	s.Start()
	env.t.Cleanup(s.Stop)
	return s
}

func userDesc(rangeID uint64, start, end string) *pb.RangeDescriptor {
	d := &pb.RangeDescriptor{RangeId: rangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	if start != "" {
		d.StartKey = []byte(start)
	}
	if end != "" {
		d.EndKey = []byte(end)
	}
	return d
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lead makes r the leader of its (single-voter) range.
func lead(t *testing.T, r *Replica) {
	t.Helper()
	waitFor(t, fmt.Sprintf("range %d to elect a leader", r.RangeID()), func() bool {
		if r.IsLeader() {
			return true
		}
		r.Campaign()
		time.Sleep(5 * time.Millisecond)
		return r.IsLeader()
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func putCmd(kvs ...string) *pb.Command {
	cmd := &pb.Command{}
	for i := 0; i < len(kvs); i += 2 {
		cmd.Mutations = append(cmd.Mutations, &pb.Mutation{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	return cmd
}

func propose(t *testing.T, r *Replica, cmd *pb.Command) Result {
	t.Helper()
	res, err := r.Propose(ctxT(t), cmd)
	if err != nil {
		t.Fatalf("range %d: Propose(%v): %v", r.RangeID(), cmd, err)
	}
	return res
}

func errCode(err error) pb.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return -1
}

// readKey reads key linearizably from r.
func readKey(t *testing.T, r *Replica, key string) (string, bool) {
	t.Helper()
	if err := r.ReadBarrier(ctxT(t)); err != nil {
		t.Fatalf("range %d: ReadBarrier: %v", r.RangeID(), err)
	}
	v, ok, err := r.Get([]byte(key))
	if err != nil {
		t.Fatalf("range %d: Get(%q): %v", r.RangeID(), key, err)
	}
	return string(v), ok
}

func wantValue(t *testing.T, r *Replica, key, want string) {
	t.Helper()
	v, ok := readKey(t, r, key)
	if want == "" {
		if ok {
			t.Errorf("range %d: %q = %q, want absent", r.RangeID(), key, v)
		}
		return
	}
	if !ok || v != want {
		t.Errorf("range %d: %q = %q (found %v), want %q", r.RangeID(), key, v, ok, want)
	}
}

func scanKeys(t *testing.T, r *Replica) []string {
	t.Helper()
	kvs, _, _, err := r.Scan(nil, nil, 0, 0, false)
	if err != nil {
		t.Fatalf("range %d: Scan: %v", r.RangeID(), err)
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestStoreSingleNode drives one node through bootstrap, writes, conditional writes, a split and a
// restart on the same engine.
func TestStoreSingleNode(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), []*pb.KeyValue{{Key: []byte("boot"), Value: []byte("strap")}}); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	s := env.start(5 * time.Millisecond)
	if n := len(s.Replicas()); n != 1 {
		t.Fatalf("after Load: %d replicas, want 1", n)
	}
	r := s.Replica(FirstUserRangeID)
	if r == nil {
		t.Fatalf("no replica of range %d after Load", FirstUserRangeID)
	}
	lead(t, r)
	if st := r.Status(); !st.IsLeader || st.LeaderNode != 1 || st.ReplicaID != 1 || st.Term <= raftlog.InitialTerm {
		t.Errorf("status after election: %+v", st)
	}

	t.Run("puts and reads", func(t *testing.T) {
		wantValue(t, r, "boot", "strap")
		for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"m", "3"}, {"z", "4"}} {
			propose(t, r, putCmd(kv[0], kv[1]))
		}
		propose(t, r, putCmd("c", "5", "y", "6")) // several mutations in one command
		for k, v := range map[string]string{"a": "1", "b": "2", "c": "5", "m": "3", "y": "6", "z": "4", "nope": ""} {
			wantValue(t, r, k, v)
		}
		res := propose(t, r, &pb.Command{Mutations: []*pb.Mutation{{Key: []byte("b"), Delete: true}}})
		if !res.Found {
			t.Errorf("delete of an existing key: Found = false")
		}
		res = propose(t, r, &pb.Command{Mutations: []*pb.Mutation{{Key: []byte("b"), Delete: true}}})
		if res.Found {
			t.Errorf("delete of a missing key: Found = true")
		}
		wantValue(t, r, "b", "")
		for want := uint64(1); want <= 3; want++ {
			if res := propose(t, r, &pb.Command{IncrementKey: []byte("ctr")}); res.Counter != want {
				t.Errorf("increment %d: Counter = %d", want, res.Counter)
			}
		}
	})

	t.Run("compare and swap", func(t *testing.T) {
		for _, tc := range []struct {
			name           string
			cond           *pb.Condition
			value          string
			swapped, found bool
			current        string
			after          string // value of the key afterwards
		}{
			{"expected matches", &pb.Condition{Key: []byte("a"), Expected: []byte("1")}, "10", true, true, "1", "10"},
			{"expected differs", &pb.Condition{Key: []byte("a"), Expected: []byte("1")}, "11", false, true, "10", "10"},
			{"expected on missing key", &pb.Condition{Key: []byte("cas"), Expected: []byte("x")}, "1", false, false, "", ""},
			{"expect absent, present", &pb.Condition{Key: []byte("a"), ExpectAbsent: true}, "12", false, true, "10", "10"},
			{"expect absent, absent", &pb.Condition{Key: []byte("cas"), ExpectAbsent: true}, "new", true, false, "", "new"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cmd := &pb.Command{Condition: tc.cond, Mutations: []*pb.Mutation{{Key: tc.cond.Key, Value: []byte(tc.value)}}}
				res := propose(t, r, cmd)
				if res.Swapped != tc.swapped || res.Found != tc.found || string(res.Current) != tc.current {
					t.Errorf("result = swapped %v found %v current %q; want %v %v %q", res.Swapped, res.Found, res.Current, tc.swapped, tc.found, tc.current)
				}
				wantValue(t, r, string(tc.cond.Key), tc.after)
			})
		}
	})

	// Split at "m": the left half keeps range 2, the right half becomes range 3.
	orig := r.Desc()
	left := proto.Clone(orig).(*pb.RangeDescriptor)
	left.EndKey = []byte("m")
	left.Generation++
	right := proto.Clone(orig).(*pb.RangeDescriptor)
	right.RangeId = 3
	right.StartKey = []byte("m")
	right.Generation = left.Generation
	split := &pb.SplitTrigger{SplitKey: []byte("m"), NewRangeId: 3, Left: left, Right: right}
	propose(t, r, &pb.Command{Split: split})

	if d := r.Desc(); !proto.Equal(d, left) {
		t.Fatalf("left descriptor after split = %v, want %v", d, left)
	}
	var r3 *Replica
	waitFor(t, "the right-hand replica", func() bool { r3 = s.Replica(3); return r3 != nil && r3.Desc() != nil })
	if d := r3.Desc(); !proto.Equal(d, right) {
		t.Fatalf("right descriptor = %v, want %v", d, right)
	}
	lead(t, r3)

	t.Run("after split", func(t *testing.T) {
		wantValue(t, r, "a", "10")
		wantValue(t, r, "cas", "new")
		wantValue(t, r3, "m", "3")
		wantValue(t, r3, "z", "4")
		if got, want := scanKeys(t, r), []string{"a", "boot", "c", "cas", "ctr"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("left scan = %v, want %v", got, want)
		}
		if got, want := scanKeys(t, r3), []string{"m", "y", "z"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("right scan = %v, want %v", got, want)
		}
		if _, _, err := r.Get([]byte("z")); errCode(err) != pb.ErrorCode_RANGE_MOVED {
			t.Errorf("left Get of a right-half key: %v, want RANGE_MOVED", err)
		}
		if _, _, err := r3.Get([]byte("a")); errCode(err) != pb.ErrorCode_RANGE_MOVED {
			t.Errorf("right Get of a left-half key: %v, want RANGE_MOVED", err)
		}
		if got := s.ReplicaForKey([]byte("z")); got != r3 {
			t.Errorf("ReplicaForKey(z) = %v, want range 3", got)
		}
		if got := s.ReplicaForKey([]byte("a")); got != r {
			t.Errorf("ReplicaForKey(a) = %v, want range 2", got)
		}

		// Commands that reach the left range's log with a right-half key are refused at apply.
		for name, cmd := range map[string]*pb.Command{
			"put":       putCmd("q", "x"),
			"mixed put": putCmd("a", "left", "q", "x"),
			"delete":    {Mutations: []*pb.Mutation{{Key: []byte("z"), Delete: true}}},
			"cas":       {Condition: &pb.Condition{Key: []byte("z"), Expected: []byte("4")}, Mutations: []*pb.Mutation{{Key: []byte("a"), Value: []byte("cas")}}},
		} {
			_, err := r.Propose(ctxT(t), cmd)
			if errCode(err) != pb.ErrorCode_RANGE_MOVED {
				t.Errorf("%s on the left range with a right-half key: %v, want RANGE_MOVED", name, err)
			}
			var e *Error
			if errors.As(err, &e) && (e.Desc == nil || !bytes.Equal(e.Desc.EndKey, []byte("m"))) {
				t.Errorf("%s: RANGE_MOVED carries descriptor %v, want the left one", name, e.Desc)
			}
		}
		wantValue(t, r, "a", "10") // the refused mixed put wrote nothing
		wantValue(t, r3, "q", "")
		wantValue(t, r3, "z", "4")

		// The same split again is stale.
		if _, err := r.Propose(ctxT(t), &pb.Command{Split: split}); errCode(err) != pb.ErrorCode_RANGE_MOVED {
			t.Errorf("repeated split: %v, want RANGE_MOVED", err)
		}

		propose(t, r3, putCmd("n", "right"))
		propose(t, r, putCmd("d", "left"))
		wantValue(t, r3, "n", "right")
		wantValue(t, r, "d", "left")
	})

	t.Run("proposals on two ranges in the same cycles", func(t *testing.T) {
		// Group commit puts both ranges' entries into one engine batch; exactness is not checked,
		// only that concurrent proposals on both ranges all succeed and land in the right range.
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := 0; i < 20; i++ {
			for _, tgt := range []struct {
				r      *Replica
				prefix string
			}{{r, "g"}, {r3, "t"}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := fmt.Sprintf("%s%02d", tgt.prefix, i)
					if _, err := tgt.r.Propose(ctxT(t), putCmd(k, k)); err != nil {
						errs <- fmt.Errorf("range %d put %s: %w", tgt.r.RangeID(), k, err)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for i := 0; i < 20; i++ {
			wantValue(t, r, fmt.Sprintf("g%02d", i), fmt.Sprintf("g%02d", i))
			wantValue(t, r3, fmt.Sprintf("t%02d", i), fmt.Sprintf("t%02d", i))
		}
	})

	t.Run("idle ranges quiesce and wake up", func(t *testing.T) {
		waitFor(t, "idle ranges to quiesce", func() bool { return s.ActiveReplicas() == 0 })
		propose(t, r, putCmd("awake", "1"))
		wantValue(t, r, "awake", "1")
		wantValue(t, r3, "z", "4")
	})

	for _, m := range env.tr.messages() {
		t.Errorf("a single-voter store sent a raft message: range %d to node %d", m.RangeId, m.ToNode)
	}
	applied2, applied3 := r.Status().Applied, r3.Status().Applied

	// Restart: a new store on the same engine finds both ranges and their data.
	s.Stop()
	if _, err := r.Propose(ctxT(t), putCmd("a", "stopped")); errCode(err) != pb.ErrorCode_UNAVAILABLE {
		t.Errorf("Propose on a stopped store: %v, want UNAVAILABLE", err)
	}
	s2 := env.start(5 * time.Millisecond)
	if n := len(s2.Replicas()); n != 2 {
		t.Fatalf("after restart: %d replicas, want 2", n)
	}
	r2, r3b := s2.Replica(FirstUserRangeID), s2.Replica(3)
	if r2 == nil || r3b == nil {
		t.Fatalf("after restart: ranges 2 and 3 = %v, %v", r2, r3b)
	}
	if d := r2.Desc(); !proto.Equal(d, left) {
		t.Errorf("left descriptor after restart = %v, want %v", d, left)
	}
	if d := r3b.Desc(); !proto.Equal(d, right) {
		t.Errorf("right descriptor after restart = %v, want %v", d, right)
	}
	if st := r2.Status(); st.Applied < applied2 {
		t.Errorf("range 2 applied index after restart %d < %d before", st.Applied, applied2)
	}
	if st := r3b.Status(); st.Applied < applied3 {
		t.Errorf("range 3 applied index after restart %d < %d before", st.Applied, applied3)
	}
	lead(t, r2)
	lead(t, r3b)
	for k, v := range map[string]string{"a": "10", "boot": "strap", "c": "5", "cas": "new", "d": "left", "g07": "g07", "awake": "1", "b": ""} {
		wantValue(t, r2, k, v)
	}
	for k, v := range map[string]string{"m": "3", "n": "right", "t19": "t19", "y": "6", "z": "4", "q": ""} {
		wantValue(t, r3b, k, v)
	}
	if res := propose(t, r2, &pb.Command{IncrementKey: []byte("ctr")}); res.Counter != 4 {
		t.Errorf("counter after restart = %d, want 4", res.Counter)
	}
	propose(t, r3b, putCmd("z", "after restart"))
	wantValue(t, r3b, "z", "after restart")
}

func TestStoreProposeNeedsLeadership(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	// A tick interval of an hour: nothing happens unless the test asks for it.
	s := env.start(time.Hour)
	r := s.Replica(FirstUserRangeID)
	if r.IsLeader() {
		t.Fatalf("leader before any election")
	}
	if _, err := r.Propose(ctxT(t), putCmd("a", "1")); errCode(err) != pb.ErrorCode_NOT_LEADER {
		t.Errorf("Propose on a follower: %v, want NOT_LEADER", err)
	}
	if err := r.ReadBarrier(ctxT(t)); errCode(err) != pb.ErrorCode_NOT_LEADER {
		t.Errorf("ReadBarrier on a follower: %v, want NOT_LEADER", err)
	}
	lead(t, r)
	propose(t, r, putCmd("a", "1"))
	wantValue(t, r, "a", "1")

	// A proposal whose context ends before it applies reports TIMEOUT (outcome unknown).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Propose(ctx, putCmd("b", "1")); err != nil && errCode(err) != pb.ErrorCode_TIMEOUT {
		t.Errorf("Propose with a cancelled context: %v, want TIMEOUT or success", err)
	}
}

func TestStoreMessageForUnknownRangeCreatesUninitializedReplica(t *testing.T) {
	env := newStoreEnv(t)
	s := env.start(time.Hour)
	const rangeID = 50
	hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(1), To: proto.Uint64(2), Term: proto.Uint64(6), Commit: proto.Uint64(0)}
	data, err := proto.Marshal(hb)
	if err != nil {
		t.Fatal(err)
	}
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: rangeID, FromNode: 2, ToNode: 1, Message: data}})
	r := s.Replica(rangeID)
	if r == nil {
		t.Fatalf("heartbeat for an unknown range created no replica")
	}
	if r.Desc() != nil {
		t.Errorf("replica created by a message has a descriptor: %v", r.Desc())
	}
	if _, err := r.Propose(ctxT(t), putCmd("a", "1")); errCode(err) != pb.ErrorCode_UNAVAILABLE {
		t.Errorf("Propose on an uninitialized replica: %v, want UNAVAILABLE", err)
	}
	if s.ReplicaForKey([]byte("a")) != nil {
		t.Errorf("ReplicaForKey returned an uninitialized replica")
	}
	// The replica answers the leader on node 2 through the transport.
	waitFor(t, "a heartbeat response to node 2", func() bool {
		for _, m := range env.tr.messages() {
			msg := &raftpb.Message{}
			if m.RangeId == rangeID && m.ToNode == 2 && m.FromNode == 1 && proto.Unmarshal(m.Message, msg) == nil &&
				msg.GetType() == raftpb.MsgHeartbeatResp && msg.GetTo() == 1 {
				return true
			}
		}
		return false
	})

	// After removal, messages to that replica id (or an older one) are ignored; a newer id is welcome.
	s.RemoveReplica(rangeID, "test")
	if s.Replica(rangeID) != nil {
		t.Fatalf("replica still present after RemoveReplica")
	}
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: rangeID, FromNode: 2, ToNode: 1, Message: data}})
	if s.Replica(rangeID) != nil {
		t.Errorf("message to a removed replica id re-created it")
	}
	hb.To = proto.Uint64(3)
	data, _ = proto.Marshal(hb)
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: rangeID, FromNode: 2, ToNode: 1, Message: data}})
	if r := s.Replica(rangeID); r == nil || r.Status().ReplicaID != 3 {
		t.Errorf("message to a newer replica id did not create replica 3: %v", r)
	}
}

func TestStoreRemovedReplicaStopsTicking(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	for _, d := range []*pb.RangeDescriptor{userDesc(2, "", "m"), userDesc(3, "m", "")} {
		if err := boot.Bootstrap(d, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := env.start(time.Hour) // no ticks: nothing quiesces on its own
	if n := s.ActiveReplicas(); n != 2 {
		t.Fatalf("ActiveReplicas = %d after Load, want 2", n)
	}
	s.RemoveReplica(3, "test")
	if n := s.ActiveReplicas(); n != 1 {
		t.Fatalf("a destroyed replica stays in Store.active (destroyReplica never deletes it): ActiveReplicas = %d after removing one of 2, want 1; the loop keeps visiting it on every tick and the replica is never garbage collected", n)
	}
}

// bootstrapWithLearner bootstraps the first user range on node 1, with a learner on node 2: node 1
// alone is its quorum, and node 2 receives its appends (or its snapshot). It returns the range's
// descriptor.
func (env *storeEnv) bootstrapWithLearner(t *testing.T) *pb.RangeDescriptor {
	t.Helper()
	desc := userDesc(FirstUserRangeID, "", "")
	desc.Replicas = append(desc.Replicas, &pb.ReplicaDescriptor{NodeId: 2, ReplicaId: 2, Learner: true})
	desc.NextReplicaId = 3
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(desc, nil); err != nil {
		t.Fatal(err)
	}
	return desc
}

// TestStoreSnapshotToLearnerAfterTruncation makes the leader truncate its log, then has a learner on
// node 2 reject an append so that it needs entries that are gone: the store must stream a snapshot
// whose metadata and data agree. A restart afterwards recovers the truncated log.
func TestStoreSnapshotToLearnerAfterTruncation(t *testing.T) {
	env := newStoreEnv(t)
	desc := env.bootstrapWithLearner(t)
	s := env.startWith(Config{TickInterval: time.Hour, LogTruncateThreshold: 4})
	r := s.Replica(FirstUserRangeID)
	lead(t, r) // the learner does not vote: node 1 alone is a quorum
	// The silent learner holds truncation back until it is maxLogKeptFactor thresholds behind.
	const n = 4*maxLogKeptFactor + 30
	for i := 0; i < n; i++ {
		propose(t, r, putCmd(fmt.Sprintf("k%04d", i), fmt.Sprintf("v%04d", i)))
	}
	r.mu.Lock()
	first, applied := r.log.TruncatedIndex()+1, r.applied
	r.mu.Unlock()
	if first <= raftlog.InitialIndex+1 {
		t.Fatalf("log not truncated: first index %d after %d writes with threshold 4", first, int(n))
	}

	// The learner rejects the leader's last probe and hints that its log is empty.
	var probe *raftpb.Message
	for _, m := range env.tr.messages() {
		msg := &raftpb.Message{}
		if err := proto.Unmarshal(m.Message, msg); err != nil {
			t.Fatal(err)
		}
		if m.ToNode != 2 || m.RangeId != FirstUserRangeID || msg.GetTo() != 2 {
			t.Errorf("unexpected message to node %d replica %d of range %d", m.ToNode, msg.GetTo(), m.RangeId)
		}
		if msg.GetType() == raftpb.MsgApp {
			probe = msg
		}
	}
	if probe == nil {
		t.Fatalf("the leader sent no append to the learner")
	}
	rej := &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(probe.GetTerm()),
		Index: proto.Uint64(probe.GetIndex()), Reject: proto.Bool(true), RejectHint: proto.Uint64(0), LogTerm: proto.Uint64(0)}
	data, err := proto.Marshal(rej)
	if err != nil {
		t.Fatal(err)
	}
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: FirstUserRangeID, FromNode: 2, ToNode: 1, Message: data}})
	waitFor(t, "a snapshot to the learner", func() bool { h, _ := env.tr.snapshots(); return len(h) > 0 })

	headers, kvss := env.tr.snapshots()
	h, kvs := headers[0], kvss[0]
	if h.RangeId != FirstUserRangeID || h.FromNode != 1 || h.ToNode != 2 {
		t.Errorf("snapshot header = %v", h)
	}
	msg := &raftpb.Message{}
	if err := proto.Unmarshal(h.Message, msg); err != nil {
		t.Fatal(err)
	}
	meta := msg.GetSnapshot().GetMetadata()
	if msg.GetType() != raftpb.MsgSnap || msg.GetTo() != 2 || meta.GetIndex() < first-1 || meta.GetIndex() < applied {
		t.Errorf("snapshot message type %v to %d at index %d (log starts at %d, applied %d)", msg.GetType(), msg.GetTo(), meta.GetIndex(), first, applied)
	}
	r.mu.Lock()
	term, terr := r.log.Term(meta.GetIndex())
	r.mu.Unlock()
	if terr != nil || term != meta.GetTerm() {
		t.Errorf("snapshot term %d, log says %d (%v)", meta.GetTerm(), term, terr)
	}
	if cs := meta.GetConfState(); fmt.Sprint(cs.GetVoters()) != "[1]" || fmt.Sprint(cs.GetLearners()) != "[2]" {
		t.Errorf("snapshot conf state = %v, want voters [1] learners [2]", cs)
	}
	sd := &pb.RangeDescriptor{}
	if err := proto.Unmarshal(msg.GetSnapshot().GetData(), sd); err != nil || !proto.Equal(sd, desc) {
		t.Errorf("snapshot descriptor = %v (%v), want %v", sd, err, desc)
	}
	if len(kvs) != n {
		t.Fatalf("snapshot carried %d pairs, want %d", len(kvs), n)
	}
	for i, kv := range kvs {
		if v, _ := stored.Decode(kv.Value); string(kv.Key) != fmt.Sprintf("k%04d", i) || string(v.Data) != fmt.Sprintf("v%04d", i) || v.Version != 1 {
			want := fmt.Sprintf("k%04d=v%04d (version 1)", i, i)
			t.Errorf("snapshot pair %d = %q=%q, want %s", i, kv.Key, kv.Value, want)
		}
	}

	// The learner's node installs the snapshot, ingested as an sstable or written through a batch:
	// the same data either way.
	for _, ingest := range []bool{true, false} {
		installOnLearner(t, h, kvs, ingest)
	}

	// Restart on the truncated log.
	s.Stop()
	s2 := env.startWith(Config{TickInterval: time.Hour, LogTruncateThreshold: 4})
	r2 := s2.Replica(FirstUserRangeID)
	r2.mu.Lock()
	first2 := r2.log.TruncatedIndex() + 1
	r2.mu.Unlock()
	if first2 < first {
		t.Errorf("first index after restart %d < %d before", first2, first)
	}
	lead(t, r2)
	for i := 0; i < n; i++ {
		wantValue(t, r2, fmt.Sprintf("k%04d", i), fmt.Sprintf("v%04d", i))
	}
	propose(t, r2, putCmd("after", "restart"))
	wantValue(t, r2, "after", "restart")
}

// TestSnapshotSourceDoubleClose: the transport's SendSnapshot "always closes src", and
// Store.startSnapshotLocked closes it again afterwards. A Pebble iterator returns its memory to a pool
// on Close, so the second Close tears down whichever iterator reused that memory in the meantime.
func TestSnapshotSourceDoubleClose(t *testing.T) {
	env := newStoreEnv(t)
	b := env.eng.NewBatch()
	for _, k := range []string{"a", "b", "c"} {
		if err := b.Set(storage.UserDataKey([]byte(k)), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	snap := env.eng.NewSnapshot()
	defer snap.Close()
	lo, hi := storage.DataSpan(false, nil, nil)
	src, err := snapstream.New(snap, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&fakeTransport{}).SendSnapshot(ctxT(t), &pb.RaftMessage{ToNode: 2}, src); err != nil {
		t.Fatal(err)
	}
	src.Close() // what the real transport does
	other, err := env.eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	src.Close() // what the store does afterwards
	count := 0
	for ok := other.First(); ok; ok = other.Next() {
		count++
	}
	if count != 3 || other.Error() != nil {
		t.Fatalf("an unrelated iterator saw %d keys (%v) after the source was closed twice, want 3", count, other.Error())
	}
}

// A replica can be built (for a message from a new range's leader) while the split that creates the
// range commits on this node. Its state must come from one view: before the fix, a hard state read
// before the split (commit 0) paired with the applied index read after it (10) made raft panic.
func TestStoreNewReplicaDuringSplitCommit(t *testing.T) {
	env := newStoreEnv(t)
	s := env.start(time.Hour)
	const rangeID = 60
	desc := userDesc(rangeID, "m", "z")
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			// Commit the split's initial state, then clear it again, as fast as the engine allows.
			b := env.eng.NewIndexedBatch()
			err := writeInitialState(b, desc)
			if err == nil {
				err = b.Commit(false)
			}
			b.Close()
			if err == nil {
				b = env.eng.NewIndexedBatch()
				for _, k := range [][]byte{storage.HardStateKey(rangeID), storage.TruncatedStateKey(rangeID),
					storage.AppliedStateKey(rangeID), storage.ConfStateKey(rangeID), storage.RangeDescKey(rangeID)} {
					if err = b.Delete(k); err != nil {
						break
					}
				}
				if err == nil {
					err = b.Commit(false)
				}
				b.Close()
			}
			if err != nil {
				writerDone <- err
				return
			}
		}
	}()
	// Stop the writer before the engine closes, even when raft panics below.
	defer func() {
		close(stop)
		if err := <-writerDone; err != nil {
			t.Error(err)
		}
	}()
	var initialized, blank int
	for i := 0; i < 500; i++ {
		r, err := s.newReplica(rangeID, 1)
		if err != nil {
			t.Fatalf("newReplica: %v", err)
		}
		st := r.rn.Status()
		if r.applied > st.GetCommit() {
			t.Errorf("replica built with applied %d > commit %d", r.applied, st.GetCommit())
		}
		if r.desc != nil {
			initialized++
		} else {
			blank++
		}
	}
	t.Logf("%d replicas built from the split's state, %d blank", initialized, blank)
}

// The proposal gate refuses user writes beyond its limit with OVERLOADED, keeps a write whose client
// gave up counted until raft resolves it, never refuses the cluster's own commands, and admits again
// once the held entries fail.
func TestStoreProposalAdmission(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := env.startWith(Config{TickInterval: time.Hour, ProposalLimits: admission.Limits{Count: 1}})
	r := s.Replica(FirstUserRangeID)
	lead(t, r)
	propose(t, r, putCmd("a", "1")) // admitted and applied: the gate is free again
	if st := s.ProposalAdmission(); st.InFlight != 0 || st.Admitted != 1 {
		t.Fatalf("after one applied write: %+v", st)
	}
	// A second voter that never answers: nothing commits any more, and without ticks the leader keeps
	// its leadership.
	d := r.Desc()
	nd := proto.Clone(d).(*pb.RangeDescriptor)
	nd.Replicas = append(nd.Replicas, &pb.ReplicaDescriptor{NodeId: 2, ReplicaId: 2})
	nd.NextReplicaId, nd.Generation = 3, d.Generation+1
	if err := r.ChangeReplicas(ctxT(t), nd, []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(2)}}); err != nil {
		t.Fatalf("add a silent voter: %v", err)
	}

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Propose(short, putCmd("b", "2")); errCode(err) != pb.ErrorCode_TIMEOUT {
		t.Fatalf("write without a quorum: %v, want TIMEOUT", err)
	}
	if st := s.ProposalAdmission(); st.InFlight != 1 || st.Bytes == 0 {
		t.Fatalf("the abandoned write is not counted: %+v", st)
	}
	_, err := r.Propose(ctxT(t), putCmd("c", "3"))
	if errCode(err) != pb.ErrorCode_OVERLOADED {
		t.Fatalf("write beyond the limit: %v, want OVERLOADED", err)
	}
	if !strings.Contains(err.Error(), "overloaded") {
		t.Errorf("refusal does not say why: %v", err)
	}
	// The cluster's own commands pass the full gate (this one cannot commit either: it times out).
	short2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := r.Propose(short2, &pb.Command{IncrementKey: []byte("counter")}); errCode(err) != pb.ErrorCode_TIMEOUT {
		t.Errorf("a counter increment with the gate full: %v, want TIMEOUT (not refused)", err)
	}
	// The held write fails with the replica; its share of the gate comes back.
	s.RemoveReplica(FirstUserRangeID, "test")
	if st := s.ProposalAdmission(); st.InFlight != 0 || st.Bytes != 0 || st.Refused != 1 {
		t.Errorf("after the replica's removal: %+v, want nothing in flight and one refusal", st)
	}
}

// The commit watchdog fails the node once a raft-loop commit has been blocked past the timeout, and
// leaves a commit that finishes in time alone.
func TestStoreCommitStallWatchdog(t *testing.T) {
	s, stalled := startCommitWithinTimeout(t)
	// One blocked for longer (as on a disk full for sstables only, where Pebble blocks without error).
	s.commitSince.Store(time.Now().Add(-time.Second).UnixNano())
	select {
	case d := <-stalled:
		if d < 200*time.Millisecond {
			t.Errorf("stalled for %v, below the timeout", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not fire on a commit blocked for 1 s with a 200 ms timeout")
	}
	s.commitSince.Store(0)
}

// startCommitWithinTimeout starts a store with a 200-ms commit watchdog and holds a commit in
// progress for half that: the watchdog must not fire. A host that stalls the test (or the watchdog
// between its reading of the commit's start and of the clock) makes the commit last past the timeout
// as the watchdog sees it, and it then fires as it should, once per store, reporting that: that
// attempt proves nothing, and the next runs on a new store. Fired under the timeout is a failure.
func startCommitWithinTimeout(t *testing.T) (*Store, chan time.Duration) {
	const timeout = 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		stalled := make(chan time.Duration, 1)
		s := newStoreEnv(t).startWith(Config{TickInterval: time.Hour, CommitStallTimeout: timeout,
			OnCommitStall: func(d time.Duration) { stalled <- d }})
		began := time.Now()
		s.commitSince.Store(began.UnixNano())
		time.Sleep(timeout / 2)
		s.commitSince.Store(0)
		held := time.Since(began)
		select {
		case d := <-stalled:
			if d < timeout {
				t.Fatalf("watchdog fired on a commit in progress for %v (%v as the test saw it), under the %v timeout", d, held, timeout)
			}
			if attempt == 10 {
				t.Fatalf("a commit meant to last %v lasted %v as the watchdog saw it on every attempt", timeout/2, d)
			}
			t.Logf("a commit meant to last %v lasted %v as the watchdog saw it (%v as the test did): again on a new store", timeout/2, d, held)
		case <-time.After(300 * time.Millisecond):
			return s, stalled
		}
	}
}

// installOnLearner hands a snapshot for replica 2 to a store of its own as node 2, waits for the
// replica to be initialized and checks its data, and whether it came by ingestion.
func installOnLearner(t *testing.T, h *pb.RaftMessage, kvs []*pb.KeyValue, ingest bool) {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	min := int64(1)
	if !ingest {
		min = -1
	}
	s := NewStore(Config{NodeID: 2, Engine: eng, Transport: &fakeTransport{}, TickInterval: time.Hour,
		SnapshotIngestMinBytes: min, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	if err := s.HandleSnapshot(h, kvs); err != nil {
		t.Fatalf("HandleSnapshot: %v", err)
	}
	// The replica takes its descriptor before the batch holding the snapshot commits; the applied
	// state is written in that batch, so once it is readable the data is too.
	waitFor(t, "the learner to install the snapshot", func() bool {
		r := s.Replica(h.RangeId)
		if r == nil || r.Desc() == nil {
			return false
		}
		_, found, err := eng.Get(storage.AppliedStateKey(h.RangeId))
		return err == nil && found
	})
	r := s.Replica(h.RangeId)
	for _, kv := range kvs {
		v, found, err := eng.Get(r.dataKey(kv.Key))
		if err != nil || !found || !bytes.Equal(v, kv.Value) {
			t.Fatalf("ingest=%v: %s = %q (found %v, %v), want %q", ingest, kv.Key, v, found, err, kv.Value)
		}
	}
	if got := eng.IngestStats().Ingests; (got == 1) != ingest {
		t.Fatalf("ingest=%v: %d ingests", ingest, got)
	}
}

// TestChangeReplicasWaitsUntilRaftTakesConfChanges: raft silently drops a conf change while the
// configuration is joint or a new leader has not applied an entry of its term; ChangeReplicas waits
// for those to pass instead of proposing a change that would never apply.
func TestChangeReplicasWaitsUntilRaftTakesConfChanges(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := env.startWith(Config{TickInterval: time.Hour})
	r := s.Replica(FirstUserRangeID)
	lead(t, r)
	addLearner := func(ctx context.Context, node uint64) error {
		d := r.Desc()
		nd := proto.Clone(d).(*pb.RangeDescriptor)
		nd.Replicas = append(nd.Replicas, &pb.ReplicaDescriptor{NodeId: node, ReplicaId: nd.NextReplicaId, Learner: true})
		nd.NextReplicaId, nd.Generation = nd.NextReplicaId+1, d.Generation+1
		return r.ChangeReplicas(ctx, nd, []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(nd.NextReplicaId - 1)}})
	}
	// Right after the election: applies (waiting for the leader's first entry if need be).
	if err := addLearner(ctxT(t), 2); err != nil {
		t.Fatalf("conf change right after the election: %v", err)
	}
	// In a joint configuration: refused with TIMEOUT when the caller's deadline passes first.
	r.mu.Lock()
	saved := r.log.ConfState().VotersOutgoing
	r.log.ConfState().VotersOutgoing = []uint64{1, 7}
	r.mu.Unlock()
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := addLearner(short, 3); errCode(err) != pb.ErrorCode_TIMEOUT || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("conf change in a joint configuration: %v, want TIMEOUT (not ready)", err)
	}
	r.mu.Lock()
	r.log.ConfState().VotersOutgoing = saved
	r.mu.Unlock()
	if err := addLearner(ctxT(t), 3); err != nil {
		t.Fatalf("conf change once the configuration is simple again: %v", err)
	}
	if d := r.Desc(); len(d.Replicas) != 3 {
		t.Fatalf("descriptor %v: want the two learners", d)
	}
	// A change that cannot commit (a second voter that never answers) stays pending in raft after
	// its proposer gave up; the next one waits for it rather than being dropped by raft unseen.
	d := r.Desc()
	nd := proto.Clone(d).(*pb.RangeDescriptor)
	nd.Replicas = append(nd.Replicas, &pb.ReplicaDescriptor{NodeId: 4, ReplicaId: nd.NextReplicaId})
	nd.NextReplicaId, nd.Generation = nd.NextReplicaId+1, d.Generation+1
	if err := r.ChangeReplicas(ctxT(t), nd, []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(nd.NextReplicaId - 1)}}); err != nil {
		t.Fatalf("add a silent voter: %v", err)
	}
	short2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := addLearner(short2, 5); errCode(err) != pb.ErrorCode_TIMEOUT || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("conf change without a quorum: %v, want TIMEOUT (outcome unknown)", err)
	}
	short3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel3()
	if err := addLearner(short3, 6); errCode(err) != pb.ErrorCode_TIMEOUT || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("conf change behind a pending one: %v, want TIMEOUT (not ready)", err)
	}
}
