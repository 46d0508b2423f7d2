package netfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// netnsNet is the Network of separate hosts: every node runs in a network namespace of its own with
// one veth link into a bridge, and the driver reaches the bridge from the root namespace over one
// more veth. Addresses are private: 10.213.K.1 for the driver and 10.213.K.(10+i) for node i, with K
// picked per run so that concurrent runs do not collide.
//
// The bridge lives in a namespace of its own ("switch"), not in the root namespace: a host with
// bridge-nf-call-iptables on and a FORWARD policy of DROP (any host running Docker) would otherwise
// drop the traffic between two nodes. The switch namespace has its own, empty, accepting iptables.
//
// A link between two nodes is cut with a blackhole route to the peer in each node's namespace; the
// link between the driver and a node with a blackhole route to the driver's address in the node's
// namespace. Namespaces are named shoalchaos-<driver pid>-<K>-…, so a later run can delete those
// of a driver that died without cleaning up.
type netnsNet struct {
	n      int
	k      int
	prefix string // shoalchaos-<pid>-<K>
	logf   func(format string, args ...any)

	mu     sync.Mutex
	cut    LinkSet
	closed bool
}

// nsPrefix is the prefix of every namespace a chaos run creates.
const nsPrefix = "shoalchaos-"

var nsName = regexp.MustCompile(`^` + nsPrefix + `(\d+)-(\d+)-`)

// NetnsAvailable reports whether this process may create network namespaces, links and routes (it
// tries: root without CAP_NET_ADMIN, a read-only /run/netns, a missing ip command all fail here).
func NetnsAvailable() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("no ip command: %w", err)
	}
	name := fmt.Sprintf("%sprobe-%d-%d", nsPrefix, os.Getpid(), rand.IntN(1_000_000))
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	defer ip("netns", "del", name)
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		return err
	}
	return nil
}

// ip runs the ip command with args, bounded by 20 s.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ipOutput runs ip with args and returns its standard output.
func ipOutput(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// sweepStaleNamespaces deletes the namespaces of chaos drivers that are no longer running, killing
// what still runs inside them.
func sweepStaleNamespaces(logf func(string, ...any)) {
	out, err := ipOutput("netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		m := nsName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); pid == os.Getpid() || !errors.Is(err, syscall.ESRCH) {
			continue // its driver still runs
		}
		killNamespace(name)
		if err := ip("netns", "del", name); err == nil {
			logf("deleted stale namespace %s (driver pid %d is gone)", name, pid)
		}
		k, _ := strconv.Atoi(m[2])
		ip("link", "del", hostVeth(k)) // gone with its peer already, unless the switch survived
	}
}

// killNamespace SIGKILLs every process in namespace name.
func killNamespace(name string) {
	out, err := ipOutput("netns", "pids", name)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func hostVeth(k int) string { return fmt.Sprintf("shc%dh", k) }

// NewNetns builds the namespaces, the bridge and the links of n nodes.
func NewNetns(n int, rng *rand.Rand, logf func(string, ...any)) (*netnsNet, error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("netns network: %d nodes (want 1..200)", n)
	}
	sweepStaleNamespaces(logf)
	addrs, _ := ipOutput("-4", "-o", "addr")
	// Pick K: creating the driver's veth pair, named after K, is the lock against concurrent runs.
	var k int
	for _, cand := range rng.Perm(250) {
		cand++
		if strings.Contains(addrs, fmt.Sprintf(" 10.213.%d.", cand)) {
			continue
		}
		if err := ip("link", "add", hostVeth(cand), "type", "veth", "peer", "name", fmt.Sprintf("shc%ds", cand)); err == nil {
			k = cand
			break
		}
	}
	if k == 0 {
		return nil, errors.New("netns network: no free 10.213.K.0/24 subnet (or veth pairs cannot be created)")
	}
	nn := &netnsNet{n: n, k: k, prefix: fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), k), logf: logf, cut: LinkSet{}}
	if err := nn.build(); err != nil {
		nn.Close()
		return nil, err
	}
	return nn, nil
}

func (nn *netnsNet) sw() string          { return nn.prefix + "-sw" }
func (nn *netnsNet) ns(i int) string     { return fmt.Sprintf("%s-n%d", nn.prefix, i+1) }
func (nn *netnsNet) nodeIP(i int) string { return fmt.Sprintf("10.213.%d.%d", nn.k, 10+i) }
func (nn *netnsNet) hostIP() string      { return fmt.Sprintf("10.213.%d.1", nn.k) }

func (nn *netnsNet) build() error {
	sw, k := nn.sw(), nn.k
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
		{"link", "set", fmt.Sprintf("shc%ds", k), "netns", sw},
		{"-n", sw, "link", "set", fmt.Sprintf("shc%ds", k), "master", "br0", "up"},
		{"addr", "add", nn.hostIP() + "/24", "dev", hostVeth(k)},
		{"link", "set", hostVeth(k), "up"},
	}
	for i := 0; i < nn.n; i++ {
		ns, veth := nn.ns(i), fmt.Sprintf("shc%dv%d", k, i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"link", "add", veth, "netns", sw, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", sw, "link", "set", veth, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", nn.nodeIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("netns network: %w", err)
		}
	}
	return nil
}

func (nn *netnsNet) Mode() string { return "netns" }

func (nn *netnsNet) Addrs(i int) NodeAddrs {
	a := nn.nodeIP(i)
	return NodeAddrs{Listen: a + ":26257", Advertise: a + ":26257", HTTP: a + ":8080"}
}

func (nn *netnsNet) Command(i int, path string, args ...string) *exec.Cmd {
	// ip netns exec enters the namespace and then execs path: the pid is the node's.
	return exec.Command("ip", append([]string{"netns", "exec", nn.ns(i), path}, args...)...)
}

func (nn *netnsNet) Started(int, int) {}

// routes returns the blackhole routes that cut l: (namespace, destination) pairs.
func (nn *netnsNet) routes(l Link) [][2]string {
	if l.A == Client {
		return [][2]string{{nn.ns(l.B), nn.hostIP()}}
	}
	return [][2]string{{nn.ns(l.A), nn.nodeIP(l.B)}, {nn.ns(l.B), nn.nodeIP(l.A)}}
}

func (nn *netnsNet) Apply(cut LinkSet) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if nn.closed {
		return errors.New("netns network: closed")
	}
	var errs []error
	for l := range nn.cut {
		if !cut[l] {
			for _, r := range nn.routes(l) {
				if err := ip("-n", r[0], "route", "del", "blackhole", r[1]+"/32"); err != nil {
					errs = append(errs, err)
				}
			}
			delete(nn.cut, l)
		}
	}
	for l, c := range cut {
		if c && !nn.cut[l] {
			for _, r := range nn.routes(l) {
				if err := ip("-n", r[0], "route", "add", "blackhole", r[1]+"/32"); err != nil {
					errs = append(errs, err)
				}
			}
			nn.cut[l] = true
		}
	}
	return errors.Join(errs...)
}

// Close kills whatever still runs in the namespaces and deletes them (the veths go with them).
func (nn *netnsNet) Close() error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if nn.closed {
		return nil
	}
	nn.closed = true
	var errs []error
	for i := 0; i < nn.n; i++ {
		killNamespace(nn.ns(i))
	}
	for i := 0; i < nn.n; i++ {
		if err := ip("netns", "del", nn.ns(i)); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	if err := ip("netns", "del", nn.sw()); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	// The driver's veth disappears with its peer in the switch namespace, asynchronously; delete it
	// if it is still there after a while (the switch was never created). Gone meanwhile is success.
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := ipOutput("link", "show", hostVeth(nn.k)); err != nil {
			break
		}
		if time.Now().After(wait) {
			if err := ip("link", "del", hostVeth(nn.k)); err != nil && !strings.Contains(err.Error(), "Cannot find device") &&
				!strings.Contains(err.Error(), "No such device") {
				errs = append(errs, err)
			}
			break
		}
	}
	return errors.Join(errs...)
}
