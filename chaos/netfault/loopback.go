package netfault

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loopbackNet is the Network used without CAP_NET_ADMIN: every node listens on a private loopback
// port and advertises the port of a proxy inside the driver, so every connection to a node — from
// another node or from the driver — passes through the proxy. The proxy finds which process opened
// a connection (the owner of the dialing socket, from /proc/net/tcp and /proc/PID/fd) and stalls
// the traffic of the connections whose link is cut, in both directions, until the link heals: the
// bytes already read are held, nothing is dropped, as TCP over a partitioned network would do.
// Connections whose dialer is not a node (the workload, the nemesis, a CLI) belong to Client.
type loopbackNet struct {
	n       int
	addrs   []NodeAddrs
	fronts  []net.Listener
	selfPid int
	logf    func(format string, args ...any)

	mu     sync.Mutex
	wake   *sync.Cond // broadcast when cut changes or the network closes
	pids   []int
	cut    LinkSet
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// proxyConn is one proxied connection: the accepted one and the one to the node.
type proxyConn struct {
	link     Link
	from, to net.Conn
}

func (c *proxyConn) close() {
	c.from.Close()
	if c.to != nil {
		c.to.Close()
	}
}

// NewLoopback reserves loopback ports for n nodes and starts their proxies.
func NewLoopback(n int, logf func(string, ...any)) (*loopbackNet, error) {
	ln := &loopbackNet{n: n, selfPid: os.Getpid(), logf: logf, pids: make([]int, n), cut: LinkSet{}, conns: map[*proxyConn]struct{}{}}
	ln.wake = sync.NewCond(&ln.mu)
	for i := 0; i < n; i++ {
		front, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("loopback network: proxy listener of n%d: %w", i+1, err)
		}
		ln.fronts = append(ln.fronts, front)
		listen, err := freePort()
		if err != nil {
			ln.Close()
			return nil, err
		}
		httpAddr, err := freePort()
		if err != nil {
			ln.Close()
			return nil, err
		}
		ln.addrs = append(ln.addrs, NodeAddrs{Listen: listen, Advertise: front.Addr().String(), HTTP: httpAddr})
	}
	for i := range ln.fronts {
		ln.wg.Add(1)
		go ln.serve(i)
	}
	return ln, nil
}

// freePort returns a loopback address with a port that was free a moment ago. The nodes bind it
// later (with SO_REUSEADDR); another process taking it in between makes that node fail to start,
// which the run reports.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("loopback network: reserve a port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

func (ln *loopbackNet) Mode() string          { return "loopback" }
func (ln *loopbackNet) Addrs(i int) NodeAddrs { return ln.addrs[i] }

func (ln *loopbackNet) Command(i int, path string, args ...string) *exec.Cmd {
	return exec.Command(path, args...)
}

func (ln *loopbackNet) Started(i int, pid int) {
	ln.mu.Lock()
	ln.pids[i] = pid
	ln.mu.Unlock()
}

func (ln *loopbackNet) Apply(cut LinkSet) error {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.cut = LinkSet{}
	for l, c := range cut {
		if c {
			ln.cut[l] = true
		}
	}
	ln.wake.Broadcast()
	return nil
}

func (ln *loopbackNet) Close() error {
	ln.mu.Lock()
	if ln.closed {
		ln.mu.Unlock()
		return nil
	}
	ln.closed = true
	for c := range ln.conns {
		c.close()
	}
	ln.wake.Broadcast()
	ln.mu.Unlock()
	for _, f := range ln.fronts {
		f.Close()
	}
	ln.wg.Wait()
	return nil
}

// serve accepts the connections to node to's proxy.
func (ln *loopbackNet) serve(to int) {
	defer ln.wg.Done()
	for {
		c, err := ln.fronts[to].Accept()
		if err != nil {
			return
		}
		ln.wg.Add(1)
		go func() {
			defer ln.wg.Done()
			ln.proxy(c, to)
		}()
	}
}

// proxy forwards one accepted connection to node to, holding it while its link is cut.
func (ln *loopbackNet) proxy(c net.Conn, to int) {
	from := ln.owner(c)
	pc := &proxyConn{link: NewLink(from, to), from: c}
	if !ln.track(pc) {
		c.Close()
		return
	}
	defer ln.untrack(pc)
	defer pc.close()
	// Like a SYN over a cut link: nothing reaches the node until the link heals.
	if !ln.waitLink(pc.link) {
		return
	}
	backend, err := net.DialTimeout("tcp", ln.addrs[to].Listen, 5*time.Second)
	if err != nil {
		return // the node is down: the dialer sees its connection closed
	}
	ln.mu.Lock()
	pc.to = backend
	closed := ln.closed
	ln.mu.Unlock()
	if closed {
		return
	}
	done := make(chan struct{}, 2)
	go func() { ln.pump(pc, backend, c); done <- struct{}{} }()
	go func() { ln.pump(pc, c, backend); done <- struct{}{} }()
	<-done // either side ended: end both
}

// pump copies src to dst, stalling before each write while the connection's link is cut.
func (ln *loopbackNet) pump(pc *proxyConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !ln.waitLink(pc.link) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitLink blocks while l is cut; it returns false if the network closed meanwhile.
func (ln *loopbackNet) waitLink(l Link) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for ln.cut[l] && !ln.closed {
		ln.wake.Wait()
	}
	return !ln.closed
}

func (ln *loopbackNet) track(pc *proxyConn) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.closed {
		return false
	}
	ln.conns[pc] = struct{}{}
	return true
}

func (ln *loopbackNet) untrack(pc *proxyConn) {
	ln.mu.Lock()
	delete(ln.conns, pc)
	ln.mu.Unlock()
}

// owner returns the endpoint whose process dialed c: a node if one of the nodes' processes holds the
// dialing socket, else Client.
func (ln *loopbackNet) owner(c net.Conn) int {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return Client
	}
	inode, err := socketInode(remote, local)
	if err != nil {
		return Client
	}
	ln.mu.Lock()
	pids := append([]int(nil), ln.pids...)
	ln.mu.Unlock()
	for i, pid := range pids {
		if pid != 0 && holdsSocket(pid, inode) {
			return i
		}
	}
	return Client
}

// socketInode finds, in /proc/net/tcp and /proc/net/tcp6, the inode of the socket whose local
// address is local and whose peer is remote.
func socketInode(local, remote *net.TCPAddr) (string, error) {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			if procAddrIs(fields[1], local) && procAddrIs(fields[2], remote) {
				f.Close()
				return fields[9], nil
			}
		}
		f.Close()
	}
	return "", fmt.Errorf("no socket %v → %v in /proc/net/tcp", local, remote)
}

// procAddrIs reports whether s, an address as /proc/net/tcp{,6} prints it ("0100007F:1F90": the IP
// in host-order 32-bit words, the port in hex), is a.
func procAddrIs(s string, a *net.TCPAddr) bool {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || len(raw)%4 != 0 {
		return false
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 { // each 32-bit word is little-endian on the machines we run on
		ip[w], ip[w+1], ip[w+2], ip[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	return ip.Equal(a.IP)
}

// holdsSocket reports whether process pid has socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	want := "socket:[" + inode + "]"
	for {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if target, err := os.Readlink(filepath.Join(dir, name)); err == nil && target == want {
				return true
			}
		}
		if err == io.EOF || err != nil {
			return false
		}
	}
}
