package chaos

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoaldb/shoal/chaos/netfault"
)

// nodeState is what the driver last did to a node's process.
type nodeState int

const (
	nodeDown    nodeState = iota // not running (killed, stopped or never started)
	nodeRunning                  // running
	nodePaused                   // SIGSTOPped
)

func (s nodeState) String() string {
	return [...]string{"down", "running", "paused"}[s]
}

// readyLine is the line `shoal start` prints once it serves.
var readyLine = regexp.MustCompile(`(?m)^shoal node (\d+) ready grpc=(\S+) http=(\S+)`)

// node is one `shoal start` process of the run, restarted as often as the nemesis wants on the same
// data directory and addresses.
type node struct {
	idx  int // 0-based; shown as n<idx+1>
	dir  string
	log  string // combined output of every incarnation
	bin  string
	net  netfault.Network
	join string   // address to join through on the first start (empty: bootstrap)
	args []string // more `shoal start` flags, on every start

	mu      sync.Mutex
	state   nodeState
	proc    *os.Process
	done    chan struct{} // closed when the current process has exited
	id      uint64        // the cluster's id of the node, from the ready line
	starts  int
	started bool // a store exists in dir (the first start succeeded)
	expect  bool // the driver asked the current process to exit (kill, stop)
}

func (n *node) name() string { return fmt.Sprintf("n%d", n.idx+1) }

// logWriter appends a node's output to its log file and reports the ready line.
type logWriter struct {
	f     io.Writer
	mu    sync.Mutex
	buf   []byte
	ready chan uint64 // receives the node id once
	sent  bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.buf = append(w.buf, p...)
		if m := readyLine.FindSubmatch(w.buf); m != nil {
			id, _ := strconv.ParseUint(string(m[1]), 10, 64)
			w.ready <- id
			w.sent, w.buf = true, nil
		} else if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 && len(w.buf) > 64<<10 {
			w.buf = append([]byte(nil), w.buf[i+1:]...)
		}
	}
	return w.f.Write(p)
}

// start starts the node's process and waits up to timeout for its ready line.
func (n *node) start(timeout time.Duration) error {
	n.mu.Lock()
	if n.state != nodeDown {
		n.mu.Unlock()
		return fmt.Errorf("%s: start while %s", n.name(), n.state)
	}
	a := n.net.Addrs(n.idx)
	args := []string{"start", "--data-dir", n.dir, "--listen", a.Listen, "--advertise", a.Advertise, "--http", a.HTTP}
	args = append(args, n.args...)
	if !n.started {
		if n.join == "" {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", n.join)
		}
	}
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	n.starts++
	fmt.Fprintf(f, "=== chaos: start %d of %s at %s: %s %v\n", n.starts, n.name(), time.Now().Format(time.RFC3339Nano), n.bin, args)
	w := &logWriter{f: f, ready: make(chan uint64, 1)}
	cmd := n.net.Command(n.idx, n.bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group: a Ctrl-C at the driver's terminal reaches the driver only, which then
	// stops the nodes itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		n.mu.Unlock()
		return fmt.Errorf("%s: start: %w", n.name(), err)
	}
	done := make(chan struct{})
	n.proc, n.done, n.state, n.expect = cmd.Process, done, nodeRunning, false
	n.net.Started(n.idx, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== chaos: %s exited at %s: %v\n", n.name(), time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	n.mu.Unlock()

	select {
	case id := <-w.ready:
		n.mu.Lock()
		n.id, n.started = id, true
		n.mu.Unlock()
		return nil
	case <-done:
		n.markDown(done)
		return fmt.Errorf("%s exited before it was ready (log: %s)", n.name(), n.log)
	case <-time.After(timeout):
		n.kill()
		return fmt.Errorf("%s not ready after %v (log: %s)", n.name(), timeout, n.log)
	}
}

// markDown records that the process behind done has exited, unless a newer one runs.
func (n *node) markDown(done chan struct{}) {
	n.mu.Lock()
	if n.done == done {
		n.state, n.proc = nodeDown, nil
		n.net.Started(n.idx, 0)
	}
	n.mu.Unlock()
}

// signal sends sig to the node's current process.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("%s is not running", n.name())
	}
	return n.proc.Signal(sig)
}

// kill SIGKILLs the node and waits (up to 10 s) for it to exit.
func (n *node) kill() error {
	n.mu.Lock()
	proc, done := n.proc, n.done
	n.expect = true
	n.mu.Unlock()
	if proc == nil {
		return nil
	}
	proc.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit 10 s after SIGKILL", n.name(), proc.Pid)
	}
	n.markDown(done)
	return nil
}

// pause SIGSTOPs the node.
func (n *node) pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	n.state = nodePaused
	n.mu.Unlock()
	return nil
}

// resume SIGCONTs the node.
func (n *node) resume() error {
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.mu.Lock()
	if n.state == nodePaused {
		n.state = nodeRunning
	}
	n.mu.Unlock()
	return nil
}

// stop stops the node cleanly (SIGCONT, SIGTERM), and kills it if it has not exited after grace.
func (n *node) stop(grace time.Duration) error {
	n.mu.Lock()
	proc, done := n.proc, n.done
	n.expect = true
	n.mu.Unlock()
	if proc == nil {
		return nil
	}
	proc.Signal(syscall.SIGCONT)
	proc.Signal(syscall.SIGTERM)
	select {
	case <-done:
		n.markDown(done)
		return nil
	case <-time.After(grace):
	}
	if err := n.kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", n.name(), grace)
}

// exitedUnexpectedly reports whether the process the driver believes running has exited on its own.
func (n *node) exitedUnexpectedly() bool {
	n.mu.Lock()
	done, state, expect := n.done, n.state, n.expect
	n.mu.Unlock()
	if state == nodeDown || done == nil || expect {
		return false
	}
	select {
	case <-done:
		n.markDown(done)
		return true
	default:
		return false
	}
}

func (n *node) getState() nodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// pid is the current process's pid, 0 when none runs.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.state == nodeDown {
		return 0
	}
	return n.proc.Pid
}

func (n *node) nodeID() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id
}

// tail returns the last lines of the node's log.
func (n *node) tail(lines int) string {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return ""
	}
	end := len(b)
	for i := len(b) - 1; i >= 0 && lines > 0; i-- {
		if b[i] == '\n' && i != len(b)-1 {
			lines--
			if lines == 0 {
				return string(b[i+1 : end])
			}
		}
	}
	return string(b)
}

// raceHeader begins each report of the Go race detector, which a node built with -race writes to
// its stderr (the node's log) when it sees a data race, and goes on running.
const raceHeader = "WARNING: DATA RACE"

// firstRace returns the first race detector report in the node's log, at most maxLines lines of it,
// and how many reports the log holds; "" and 0 when it holds none (always so for a binary built
// without -race).
func (n *node) firstRace(maxLines int) (string, int) {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return "", 0
	}
	count := bytes.Count(b, []byte(raceHeader))
	i := bytes.Index(b, []byte(raceHeader))
	if i < 0 {
		return "", 0
	}
	lines := strings.SplitN(string(b[i:]), "\n", maxLines+1)
	for j, l := range lines {
		if j > 0 && strings.HasPrefix(l, "==================") { // the report's closing rule
			return strings.Join(lines[:j], "\n"), count
		}
	}
	return strings.Join(lines[:min(len(lines), maxLines)], "\n"), count
}

func nodeDir(base string, i int) string { return filepath.Join(base, fmt.Sprintf("n%d", i+1)) }
