package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/faultfs"
	"github.com/shoaldb/shoal/test/testcluster"
)

// A disk fault makes Pebble call its logger's Fatalf, and the engine's logger exits the process (see
// storage/faultfs and docs/design/diskfaults.md). So the faulty node runs in a child process of its
// own — this test binary again, in TestDiskFaultNodeProcess — that the parent drives over stdin and
// stdout; the other two nodes run in the test process.

const diskFaultNodeEnv = "SHOAL_DISKFAULT_NODE"

type faultNodeSpec struct {
	Dir, Addr, Join string
	Create          bool
}

// TestDiskFaultNodeProcess is the faulty node's process: it runs only when the parent test starts
// it (with diskFaultNodeEnv set).
func TestDiskFaultNodeProcess(t *testing.T) {
	spec := os.Getenv(diskFaultNodeEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestDiskFaultFailStop")
	}
	os.Exit(runFaultNode(spec))
}

// runFaultNode starts a node whose engine is on a faultfs and serves commands, one a line, from
// stdin. Every answer is a series of "@ ..." lines ended by "@end" (or one "@err ..." line):
//
//	fault sync        fail every sync with EIO
//	fault write       fail every write with EIO
//	fault full N      the disk is full after N more bytes
//	stats             the injected-fault counters
//	get KEY           read KEY from the local replica (no raft): "@ found HEXVALUE" or "@ missing"
//	scan START END    every pair of the local replica in [START, END): "@ HEXKEY HEXVALUE" lines
//	quit              exit at once (status 0), as a kill would
func runFaultNode(spec string) int {
	var s faultNodeSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Printf("@err spec: %v\n", err)
		return 1
	}
	ffs := faultfs.Wrap(vfs.Default)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ln, err := node.StartServing(context.Background(), node.Config{DataDir: s.Dir, Addr: s.Addr,
		Storage: storage.Options{CreateIfMissing: s.Create, FS: ffs, CacheBytes: 16 << 20}, Join: []string{s.Join},
		Raft: replica.Config{TickInterval: 50 * time.Millisecond}, HeartbeatInterval: 200 * time.Millisecond,
		KV: kv.Config{QueueInterval: 300 * time.Millisecond}, Logger: logger}, nil)
	if err != nil {
		fmt.Printf("@err start: %v\n", err)
		return 1
	}
	fmt.Printf("@ready %d\n", ln.NodeID())
	local := func(key []byte) *replica.Replica {
		for _, r := range ln.Store().Replicas() {
			d := r.Desc()
			if r.IsMeta() || d == nil {
				continue
			}
			if bytes.Compare(key, d.GetStartKey()) >= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0) {
				return r
			}
		}
		return nil
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "fault" && len(f) == 2 && f[1] == "sync":
			ffs.FailSyncs(true)
		case f[0] == "fault" && len(f) == 2 && f[1] == "write":
			ffs.FailWrites(true)
		case f[0] == "fault" && len(f) == 3 && f[1] == "full":
			n, _ := strconv.ParseInt(f[2], 10, 64)
			ffs.FillDisk(n)
		case f[0] == "stats":
			fmt.Printf("@ %+v\n", ffs.Stats())
		case f[0] == "get" && len(f) == 2:
			r := local([]byte(f[1]))
			if r == nil {
				fmt.Println("@err no local replica")
				continue
			}
			v, found, err := r.Get([]byte(f[1]))
			switch {
			case err != nil:
				fmt.Printf("@err get: %v\n", err)
				continue
			case found:
				fmt.Printf("@ found %x\n", v)
			default:
				fmt.Println("@ missing")
			}
		case f[0] == "scan" && len(f) == 3:
			r := local([]byte(f[1]))
			if r == nil {
				fmt.Println("@err no local replica")
				continue
			}
			kvs, _, truncated, err := r.Scan([]byte(f[1]), []byte(f[2]), 0, 0, false)
			if err != nil || truncated {
				fmt.Printf("@err scan: truncated=%v err=%v\n", truncated, err)
				continue
			}
			for _, p := range kvs {
				fmt.Printf("@ %x %x\n", p.GetKey(), p.GetValue())
			}
		case f[0] == "quit":
			os.Exit(0)
		default:
			fmt.Printf("@err unknown command %q\n", sc.Text())
			continue
		}
		fmt.Println("@end")
	}
	return 0 // stdin closed: the parent is gone
}

// faultNode is the parent's handle on the faulty node's process.
type faultNode struct {
	t      *testing.T
	spec   faultNodeSpec
	id     uint64
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	logf   string // the process's stderr
	exited chan struct{}
	err    error // cmd.Wait's result, once exited is closed
}

// startFaultNode starts the faulty node's process and waits for it to be up (joined).
func startFaultNode(t *testing.T, spec faultNodeSpec, logf string) *faultNode {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFaultNodeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), diskFaultNodeEnv+"="+string(b))
	logFile, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &faultNode{t: t, spec: spec, cmd: cmd, stdin: stdin, lines: make(chan string, 1<<16), logf: logf, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "@") {
				n.lines <- sc.Text()
			}
		}
		close(n.lines)
	}()
	go func() {
		n.err = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(n.kill)
	select {
	case l, ok := <-n.lines:
		if !ok || !strings.HasPrefix(l, "@ready ") {
			n.kill()
			t.Fatalf("faulty node did not start: %q\n%s", l, n.log())
		}
		n.id, _ = strconv.ParseUint(strings.TrimPrefix(l, "@ready "), 10, 64)
	case <-time.After(90 * time.Second):
		n.kill()
		t.Fatalf("faulty node did not start within 90s\n%s", n.log())
	}
	return n
}

// do sends one command and returns the lines of its answer.
func (n *faultNode) do(command string) ([]string, error) {
	if _, err := fmt.Fprintln(n.stdin, command); err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	var out []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-n.lines:
			switch {
			case !ok:
				return nil, fmt.Errorf("%s: the node's process ended", command)
			case l == "@end":
				return out, nil
			case strings.HasPrefix(l, "@err"):
				return nil, fmt.Errorf("%s: %s", command, l)
			}
			out = append(out, strings.TrimPrefix(l, "@ "))
		case <-timeout:
			return nil, fmt.Errorf("%s: no answer within 60s", command)
		}
	}
}

// get reads key from the node's local replica.
func (n *faultNode) get(key string) (string, bool, error) {
	out, err := n.do("get " + key)
	if err != nil {
		return "", false, err
	}
	if len(out) != 1 {
		return "", false, fmt.Errorf("get %s: answer %q", key, out)
	}
	if out[0] == "missing" {
		return "", false, nil
	}
	v, err := hex.DecodeString(strings.TrimPrefix(out[0], "found "))
	return string(v), true, err
}

// kill ends the process (if it still runs) and waits for it.
func (n *faultNode) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Kill()
	<-n.exited
}

func (n *faultNode) log() string {
	b, _ := os.ReadFile(n.logf)
	return string(b)
}

// ackLog records the outcome of every write.
type ackLog struct {
	mu       sync.Mutex
	acked    map[string]time.Time // key → when it was acknowledged
	definite map[string]bool      // keys whose write certainly failed
	unknown  int
	last     string // the last key acknowledged
}

func diskFaultVal(key string) string { return "val-" + key }

// TestDiskFaultFailStop gives the leader of the user range of a 3-node cluster a faulty disk while
// writes run: fsync errors, write errors (EIO) or a full disk (ENOSPC), one subtest each. The faulty node must
// exit (status 2) with a clear FATAL line, the other two must elect a leader and go on acknowledging
// writes, and nothing acknowledged may be lost. The faulty node is then restarted on its directory
// with the fault cleared: it must catch up, hold every acknowledged write in its local replica (and
// no value that was never written), and serve them all again as leader.
func TestDiskFaultFailStop(t *testing.T) {
	for _, tc := range []struct {
		name, fault, errno string
	}{
		{"fsync", "fault sync", "input/output error"},
		{"write", "fault write", "input/output error"},
		{"full", "fault full 65536", "no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) { testDiskFault(t, tc.fault, tc.errno) })
	}
}

func testDiskFault(t *testing.T, fault, errno string) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 2})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	tmp := t.TempDir()
	spec := faultNodeSpec{Dir: filepath.Join(tmp, "n3"), Addr: addr, Join: c.Nodes[0].Addr, Create: true}
	logf := filepath.Join(tmp, "n3.log")
	fn := startFaultNode(t, spec, logf)
	t.Logf("faulty node n%d runs in process %d on %s", fn.id, fn.cmd.Process.Pid, addr)

	cl, err := client.New(context.Background(), client.Config{Addrs: []string{c.Nodes[0].Addr, c.Nodes[1].Addr, addr},
		RequestTimeout: 3 * time.Second, MaxAttempts: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 90*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	const prefix = "df-"
	rs, err := testcluster.RangeOf(ctx, cl, []byte(prefix))
	if err != nil {
		t.Fatal(err)
	}
	rangeID := rs.GetDesc().GetRangeId()
	leaderIs := func(want func(uint64) bool) func() bool {
		return func() bool {
			rs, err := testcluster.RangeOf(ctx, cl, []byte(prefix))
			return err == nil && want(rs.GetLeaderNodeId())
		}
	}
	moveLeader := func(to uint64) {
		t.Helper()
		testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("n%d leads r%d", to, rangeID), func() bool {
			if leaderIs(func(l uint64) bool { return l == to })() {
				return true
			}
			tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
			cl.TransferLeader(tctx, rangeID, to)
			tcancel()
			time.Sleep(300 * time.Millisecond)
			return false
		})
	}
	moveLeader(fn.id)

	// Writers: every key is written once, with a value derived from it.
	acks := &ackLog{acked: map[string]time.Time{}, definite: map[string]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("%s%06d", prefix, seq.Add(1))
				pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
				err := cl.Put(pctx, []byte(k), []byte(diskFaultVal(k)))
				pcancel()
				acks.mu.Lock()
				switch classify(err) {
				case outOK:
					acks.acked[k] = time.Now()
					acks.last = k
				case outDefinite:
					acks.definite[k] = true
				default:
					acks.unknown++
				}
				acks.mu.Unlock()
			}
		}()
	}
	stopWriters := func() {
		if stop != nil {
			close(stop)
			wg.Wait()
			stop = nil
		}
	}
	defer stopWriters()
	ackedSince := func(since time.Time) int {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		n := 0
		for _, at := range acks.acked {
			if at.After(since) {
				n++
			}
		}
		return n
	}
	testcluster.WaitFor(t, 60*time.Second, "200 writes acknowledged with the faulty-to-be node leading", func() bool {
		return ackedSince(time.Time{}) >= 200
	})
	if !leaderIs(func(l uint64) bool { return l == fn.id })() {
		t.Logf("n%d lost the leadership of r%d before the fault; injecting anyway", fn.id, rangeID)
	}

	// Inject the fault: the node must exit with status 2 and say why. Under load the next write can
	// hit the fault and stop the node before it answers the command (seen once): that is no error.
	if _, err := fn.do(fault); err != nil && !strings.Contains(err.Error(), "process ended") {
		t.Fatalf("inject %q: %v", fault, err)
	}
	injected := time.Now()
	select {
	case <-fn.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("n%d still runs 30s after %q\n%s", fn.id, fault, fn.log())
	}
	exitedAt := time.Now()
	var ee *exec.ExitError
	if !errors.As(fn.err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("n%d ended with %v, want exit status 2\n%s", fn.id, fn.err, fn.log())
	}
	var fatal string
	for _, l := range strings.Split(fn.log(), "\n") {
		if strings.HasPrefix(l, "FATAL: ") {
			fatal = l
		}
	}
	for _, want := range []string{"FATAL: storage engine failure", "restart it", "fatal commit error", errno, "injected by faultfs"} {
		if !strings.Contains(fatal, want) {
			t.Fatalf("n%d's FATAL line %q lacks %q\n%s", fn.id, fatal, want, fn.log())
		}
	}
	t.Logf("n%d exited with status 2 %v after the fault: %s", fn.id, exitedAt.Sub(injected).Round(time.Millisecond), fatal)

	// The two other nodes elect a leader and go on acknowledging writes.
	testcluster.WaitFor(t, 60*time.Second, "200 writes acknowledged after the faulty node exited", func() bool {
		return ackedSince(exitedAt) >= 200
	})
	testcluster.WaitFor(t, 30*time.Second, fmt.Sprintf("r%d led by a healthy node", rangeID), leaderIs(func(l uint64) bool { return l != 0 && l != fn.id }))
	stopWriters()
	acks.mu.Lock()
	acked := make(map[string]bool, len(acks.acked))
	first := exitedAt.Add(time.Hour)
	for k, at := range acks.acked {
		acked[k] = true
		if at.After(exitedAt) && at.Before(first) {
			first = at
		}
	}
	last, definite, unknown := acks.last, len(acks.definite), acks.unknown
	acks.mu.Unlock()
	t.Logf("%d writes acknowledged (%d after the exit, the first %v after it), %d failed definitely, %d unknown",
		len(acked), ackedSince(exitedAt), first.Sub(exitedAt).Round(time.Millisecond), definite, unknown)

	// checkAll reads the whole prefix through the cluster: every acknowledged write is there, no write
	// that certainly failed is, and every value is the one written for its key.
	checkAll := func(when string) {
		t.Helper()
		got, err := cl.Scan(ctx, []byte(prefix), []byte(prefix+"~"), 0, false)
		if err != nil {
			t.Fatalf("scan %s: %v", when, err)
		}
		seen := make(map[string]bool, len(got))
		for _, p := range got {
			k := string(p.GetKey())
			seen[k] = true
			if string(p.GetValue()) != diskFaultVal(k) {
				t.Errorf("scan %s: %s = %q, never written", when, k, p.GetValue())
			}
			if acks.definite[k] {
				t.Errorf("scan %s: %s is there, but its write failed definitely", when, k)
			}
		}
		lost := 0
		for k := range acked {
			if !seen[k] {
				if lost < 10 {
					t.Errorf("scan %s: acknowledged write %s is lost", when, k)
				}
				lost++
			}
		}
		if lost > 0 || t.Failed() {
			t.Fatalf("scan %s: %d of %d acknowledged writes lost", when, lost, len(acked))
		}
		t.Logf("scan %s: all %d acknowledged writes there (%d keys)", when, len(acked), len(got))
	}
	checkAll(fmt.Sprintf("with n%d down", fn.id))

	// Clear the fault and restart the node on its directory: it catches up.
	spec.Create = false
	restarted := time.Now()
	fn = startFaultNode(t, spec, logf)
	testcluster.WaitFor(t, 90*time.Second, fmt.Sprintf("n%d's local replica holds %s", fn.id, last), func() bool {
		v, found, err := fn.get(last)
		return err == nil && found && v == diskFaultVal(last)
	})
	t.Logf("n%d restarted and caught up in %v", fn.id, time.Since(restarted).Round(time.Millisecond))
	out, err := fn.do("scan " + prefix + " " + prefix + "~")
	if err != nil {
		t.Fatal(err)
	}
	local := make(map[string]bool, len(out))
	for _, l := range out {
		hk, hv, _ := strings.Cut(l, " ")
		k, err1 := hex.DecodeString(hk)
		v, err2 := hex.DecodeString(hv)
		if err1 != nil || err2 != nil {
			t.Fatalf("local scan line %q", l)
		}
		local[string(k)] = true
		if string(v) != diskFaultVal(string(k)) {
			t.Errorf("n%d local replica: %s = %q, never written", fn.id, k, v)
		}
	}
	lost := 0
	for k := range acked {
		if !local[k] {
			if lost < 10 {
				t.Errorf("n%d local replica lacks acknowledged write %s", fn.id, k)
			}
			lost++
		}
	}
	if lost > 0 || t.Failed() {
		t.Fatalf("n%d local replica: %d of %d acknowledged writes missing", fn.id, lost, len(acked))
	}
	t.Logf("n%d's local replica holds all %d acknowledged writes (%d keys)", fn.id, len(acked), len(out))

	// As leader again, it serves every acknowledged write and takes new ones.
	moveLeader(fn.id)
	checkAll(fmt.Sprintf("with n%d leading again", fn.id))
	if err := cl.Put(ctx, []byte(prefix+"after"), []byte(diskFaultVal(prefix+"after"))); err != nil {
		t.Fatalf("put with n%d leading again: %v", fn.id, err)
	}
	if v, found, err := cl.Get(ctx, []byte(prefix+"after")); err != nil || !found || string(v) != diskFaultVal(prefix+"after") {
		t.Fatalf("get with n%d leading again = %q, %v, %v", fn.id, v, found, err)
	}
	if v, found, err := fn.get(prefix + "after"); err != nil || !found || v != diskFaultVal(prefix+"after") {
		t.Fatalf("n%d local get of the new write = %q, %v, %v", fn.id, v, found, err)
	}
	if _, err := fn.do("quit"); err != nil && !strings.Contains(err.Error(), "process ended") {
		t.Logf("quit: %v", err)
	}
}
