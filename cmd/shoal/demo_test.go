package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/storage"
)

// cliChildEnv makes the test binary behave as the shoal binary: `shoal demo` runs its nodes as child
// processes of os.Executable(), which in a test is this binary.
const cliChildEnv = "SHOAL_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// lockedBuffer is an io.Writer safe to share between a running command and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var demoNodeLine = regexp.MustCompile(`(?m)^node (\d+)  grpc=(\S+)  http=http://(\S+)  data=(\S+)$`)

// runningDemo is `shoal demo` running in process (its nodes are child processes).
type runningDemo struct {
	cancel      context.CancelFunc
	code        chan int
	out, errOut *lockedBuffer
	grpc        []string
	http        []string
}

func startDemo(t *testing.T, argv ...string) *runningDemo {
	t.Helper()
	t.Setenv(cliChildEnv, "1")
	resetFlags(rootCmd)
	ctx, cancel := context.WithCancel(context.Background())
	// cobra keeps a subcommand's context from an earlier in-process run (it only fills in a nil one).
	demoCmd.SetContext(ctx)
	d := &runningDemo{cancel: cancel, code: make(chan int, 1), out: &lockedBuffer{}, errOut: &lockedBuffer{}}
	go func() { d.code <- run(ctx, append([]string{"demo"}, argv...), d.out, d.errOut) }()
	deadline := time.After(150 * time.Second)
	for !strings.Contains(d.out.String(), "Dashboard: ") {
		select {
		case code := <-d.code:
			t.Fatalf("demo exited with %d before it was ready\nstdout:\n%s\nstderr:\n%s", code, d.out, d.errOut)
		case <-deadline:
			cancel()
			<-d.code
			t.Fatalf("demo not ready after 150s\nstdout:\n%s\nstderr:\n%s", d.out, d.errOut)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, m := range demoNodeLine.FindAllStringSubmatch(d.out.String(), -1) {
		d.grpc = append(d.grpc, m[2])
		d.http = append(d.http, m[3])
	}
	return d
}

// stop interrupts the demo as Ctrl-C would and expects exit 0 with every node stopped.
func (d *runningDemo) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	select {
	case code := <-d.code:
		if code != 0 {
			t.Fatalf("demo exit code %d after interrupt; stderr:\n%s", code, d.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("demo did not exit within 30s of the interrupt; stderr:\n%s", d.errOut)
	}
	for _, a := range append(append([]string{}, d.grpc...), d.http...) {
		if !portFree(a) {
			t.Errorf("%s still in use after the demo stopped", a)
		}
	}
}

func TestDemoStartStopRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	d := startDemo(t, "--nodes", "3", "--data-dir", dir)
	if len(d.grpc) != 3 {
		t.Fatalf("want 3 node lines, got:\n%s", d.out)
	}
	out := d.out.String()
	for _, want := range []string{"Dashboard: http://" + d.http[0] + "/\n", "Try: shoal --host " + d.grpc[0] + " get user/0001\n",
		"data=" + filepath.Join(dir, "n2") + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("n%d", i), "shoal.log")); err != nil {
			t.Errorf("node %d log: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: d.grpc})
	if err != nil {
		t.Fatal(err)
	}
	v, found, err := c.Get(ctx, []byte("user/0001"))
	if err != nil || !found || !json.Valid(v) {
		t.Fatalf("sample user/0001 = %q, %v, %v", v, found, err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("Nodes = %d, %v", len(nodes), err)
	}
	// The printed ids are the cluster's: admin commands given them act on the printed node.
	printed := map[string]string{}
	for _, m := range demoNodeLine.FindAllStringSubmatch(out, -1) {
		printed[m[2]] = m[1]
	}
	for _, n := range nodes {
		if id := fmt.Sprint(n.GetDesc().GetNodeId()); printed[n.GetDesc().GetAddr()] != id {
			t.Errorf("node %s at %s printed as %q:\n%s", id, n.GetDesc().GetAddr(), printed[n.GetDesc().GetAddr()], out)
		}
	}
	c.Close()
	d.stop(t)

	// A restart reuses the ports and the stores, and does not load the sample again.
	d2 := startDemo(t, "--nodes", "3", "--data-dir", dir)
	if strings.Join(d2.grpc, ",") != strings.Join(d.grpc, ",") || strings.Join(d2.http, ",") != strings.Join(d.http, ",") {
		t.Errorf("restart changed addresses: %v %v -> %v %v", d.grpc, d.http, d2.grpc, d2.http)
	}
	if errOut := d2.errOut.String(); !strings.Contains(errOut, "Restarting") || !strings.Contains(errOut, "already loaded") {
		t.Errorf("restart stderr:\n%s", errOut)
	}
	c, err = client.New(ctx, client.Config{Addrs: d2.grpc})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Get(ctx, []byte("city/lisbon")); err != nil || !found {
		t.Errorf("city/lisbon after restart: %v, %v", found, err)
	}
	c.Close()
	d2.stop(t)
}

func TestDemoUsage(t *testing.T) {
	for _, argv := range [][]string{{"demo", "--nodes", "0"}, {"demo", "--nodes", "10"}, {"demo", "--data-dir", ""}, {"demo", "x"}} {
		if code, _, errOut := shoal(t, argv...); code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2", argv, code, errOut)
		}
	}
}

func TestDemoRefusesIncompleteCluster(t *testing.T) {
	dir := t.TempDir()
	e, err := storage.Open(filepath.Join(dir, "n2"), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	code, _, errOut := shoal(t, "demo", "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "holds no store") || !strings.Contains(errOut, "remove "+dir) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// portFree reports whether addr can be listened on (nothing holds it).
func portFree(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// TestDemoChildrenDieWithIt: the nodes stop when the demo is killed outright (Linux: parent-death
// signal) or gets SIGHUP (its terminal closed), so that the next demo finds its directories free.
func TestDemoChildrenDieWithIt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if sig == syscall.SIGKILL && runtime.GOOS != "linux" {
				t.Skip("the parent-death signal is Linux's")
			}
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "demo", "--nodes", "1", "--no-sample", "--data-dir", dir)
			cmd.Env = append(os.Environ(), cliChildEnv+"=1")
			out := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
				}
			}()
			for deadline := time.Now().Add(90 * time.Second); !strings.Contains(out.String(), "Dashboard: "); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("demo not ready after 90s:\n%s", out)
				}
			}
			lock := filepath.Join(dir, "n1", "shoal.lock")
			if lockFree(t, lock) {
				t.Fatalf("%s is free while the demo runs", lock)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := <-exited
			if sig == syscall.SIGHUP && err != nil {
				t.Errorf("demo after SIGHUP: %v, want exit 0\n%s", err, out)
			}
			for deadline := time.Now().Add(20 * time.Second); !lockFree(t, lock); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the node still holds %s 20s after the demo got %v\n%s", lock, sig, out)
				}
			}
		})
	}
}

// lockFree reports whether no process holds the data-directory lock at path.
func lockFree(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
