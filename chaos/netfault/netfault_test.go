package netfault

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a helper process: with CHAOS_HELPER=echo it serves an echo server on
// CHAOS_HELPER_ADDR; with CHAOS_HELPER=dial it connects to CHAOS_HELPER_ADDR and, for every line on
// its stdin, sends it and prints the reply.
func TestMain(m *testing.M) {
	switch os.Getenv("CHAOS_HELPER") {
	case "echo":
		l, err := net.Listen("tcp", os.Getenv("CHAOS_HELPER_ADDR"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(2)
			}
			go io.Copy(c, c)
		}
	case "dial":
		c, err := net.DialTimeout("tcp", os.Getenv("CHAOS_HELPER_ADDR"), 3*time.Second)
		if err != nil {
			fmt.Println("dial error:", err)
			os.Exit(0)
		}
		fmt.Println("connected")
		in, r := bufio.NewScanner(os.Stdin), bufio.NewReader(c)
		for in.Scan() {
			fmt.Fprintln(c, in.Text())
			line, err := r.ReadString('\n')
			if err != nil {
				fmt.Println("read error:", err)
				os.Exit(0)
			}
			fmt.Print(line)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lineProc is a helper process spoken to line by line.
type lineProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, cmd *exec.Cmd, kind, addr string) *lineProc {
	t.Helper()
	cmd.Env = append(os.Environ(), "CHAOS_HELPER="+kind, "CHAOS_HELPER_ADDR="+addr)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &lineProc{cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// next returns the next line, or "" after d.
func (p *lineProc) next(d time.Duration) string {
	select {
	case l := <-p.lines:
		return l
	case <-time.After(d):
		return ""
	}
}

// echoOver sends line over c and returns the reply, or "" if none comes within d.
func echoOver(c net.Conn, r *bufio.Reader, line string, d time.Duration) string {
	fmt.Fprintln(c, line)
	c.SetReadDeadline(time.Now().Add(d))
	s, _ := r.ReadString('\n')
	c.SetReadDeadline(time.Time{})
	return strings.TrimSpace(s)
}

func TestProcAddr(t *testing.T) {
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	cases := []struct {
		s    string
		want bool
	}{
		{"0100007F:1F90", true},
		{"0100007F:1F91", false},
		{"0200007F:1F90", false},
		{"0000000000000000FFFF00000100007F:1F90", true}, // IPv4-mapped, as /proc/net/tcp6 shows it
		{"junk", false},
	}
	for _, c := range cases {
		if got := procAddrIs(c.s, a); got != c.want {
			t.Errorf("procAddrIs(%q, %v) = %v, want %v", c.s, a, got, c.want)
		}
	}
}

// TestLoopbackProxyCutsLinks checks the loopback network: a connection from another process
// registered as node 2 is told apart from the driver's own (the client), and a cut link stalls only
// its own traffic, which flows again, with nothing lost, when the link heals.
func TestLoopbackProxyCutsLinks(t *testing.T) {
	ln, err := NewLoopback(2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Node 1 is an echo server at its private address.
	backend, err := net.Listen("tcp", ln.Addrs(0).Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	front := ln.Addrs(0).Advertise

	// The driver's connection.
	cc, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cr := bufio.NewReader(cc)
	if got := echoOver(cc, cr, "hello", 5*time.Second); got != "hello" {
		t.Fatalf("client echo = %q", got)
	}

	// Node 2: another process, registered with its pid.
	p := startHelper(t, exec.Command(os.Args[0]), "dial", front)
	ln.Started(1, p.cmd.Process.Pid)
	if l := p.next(5 * time.Second); l != "connected" {
		t.Fatalf("node 2 helper: %q", l)
	}
	fmt.Fprintln(p.in, "from-n2")
	if l := p.next(5 * time.Second); l != "from-n2" {
		t.Fatalf("node 2 echo = %q", l)
	}

	// Cut n1-n2: node 2's traffic stalls, the client's does not.
	if err := ln.Apply(LinkSet{NewLink(0, 1): true}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.in, "during-cut")
	if l := p.next(700 * time.Millisecond); l != "" {
		t.Fatalf("node 2 got %q through a cut link", l)
	}
	if got := echoOver(cc, cr, "client-during-cut", 5*time.Second); got != "client-during-cut" {
		t.Fatalf("client echo during the n1-n2 cut = %q", got)
	}
	// A new connection over the cut link is held too.
	cc2, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()

	// Cut client-n1 instead: the client stalls, node 2's held line arrives.
	if err := ln.Apply(LinkSet{NewLink(Client, 0): true}); err != nil {
		t.Fatal(err)
	}
	if l := p.next(5 * time.Second); l != "during-cut" {
		t.Fatalf("node 2's line after the heal = %q, want it delivered", l)
	}
	if got := echoOver(cc, cr, "client-cut", 700*time.Millisecond); got != "" {
		t.Fatalf("client got %q through a cut link", got)
	}
	if err := ln.Apply(LinkSet{}); err != nil {
		t.Fatal(err)
	}
	cc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, _ := cr.ReadString('\n'); strings.TrimSpace(s) != "client-cut" {
		t.Fatalf("client's line after the heal = %q", s)
	}
	if got := echoOver(cc2, bufio.NewReader(cc2), "late", 5*time.Second); got != "late" {
		t.Fatalf("connection made during the cut, after the heal: %q", got)
	}
}

// TestNetnsNetwork builds the namespaces of two nodes, runs an echo server inside node 1's and checks
// that the driver and node 2 reach it until their links are cut, and that Close leaves nothing
// behind. It needs CAP_NET_ADMIN and is skipped without it.
func TestNetnsNetwork(t *testing.T) {
	if err := NetnsAvailable(); err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	nn, err := NewNetns(2, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			nn.Close()
		}
	}()
	addr := nn.Addrs(0).Listen
	srv := startHelper(t, nn.Command(0, os.Args[0]), "echo", addr)
	if l := srv.next(10 * time.Second); l != "listening" {
		t.Fatalf("echo server in n1's namespace: %q", l)
	}
	nn.Started(0, srv.cmd.Process.Pid)

	dialEcho := func() string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return ""
		}
		defer c.Close()
		return echoOver(c, bufio.NewReader(c), "ping", 2*time.Second)
	}
	fromN2 := func() string {
		p := startHelper(t, nn.Command(1, os.Args[0]), "dial", addr)
		if l := p.next(5 * time.Second); l != "connected" {
			return l
		}
		fmt.Fprintln(p.in, "ping")
		return p.next(3 * time.Second)
	}
	if got := dialEcho(); got != "ping" {
		t.Fatalf("driver → n1: %q", got)
	}
	if got := fromN2(); got != "ping" {
		t.Fatalf("n2 → n1: %q", got)
	}
	if err := nn.Apply(LinkSet{NewLink(0, 1): true}); err != nil {
		t.Fatal(err)
	}
	if got := fromN2(); got == "ping" {
		t.Fatalf("n2 reached n1 over a cut link")
	}
	if got := dialEcho(); got != "ping" {
		t.Fatalf("driver → n1 with only n1-n2 cut: %q", got)
	}
	if err := nn.Apply(LinkSet{NewLink(Client, 0): true}); err != nil {
		t.Fatal(err)
	}
	if got := dialEcho(); got == "ping" {
		t.Fatalf("driver reached n1 over a cut link")
	}
	if got := fromN2(); got != "ping" {
		t.Fatalf("n2 → n1 after the heal: %q", got)
	}
	if err := nn.Apply(LinkSet{}); err != nil {
		t.Fatal(err)
	}
	if got := dialEcho(); got != "ping" {
		t.Fatalf("driver → n1 after the heal: %q", got)
	}

	prefix := nn.prefix
	if err := nn.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	out, _ := ipOutput("netns", "list")
	if strings.Contains(out, prefix) {
		t.Fatalf("namespaces left after Close:\n%s", out)
	}
	if _, err := ipOutput("link", "show", hostVeth(nn.k)); err == nil {
		t.Fatalf("veth %s left after Close", hostVeth(nn.k))
	}
}
