// Package netfault places a chaos run's nodes on hosts of their own and cuts and heals the links
// between them (and between them and the driver): with network namespaces when the driver may create
// them (NewNetns), else behind proxies on loopback (NewLoopback); NewPlain is loopback with nothing
// between the nodes, for runs that cut no links. It never starts or stops a node: it only tells
// how to run one (Network.Command) and where it listens.
package netfault

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Client is the endpoint of the chaos driver itself in a Link: the workload's clients and the
// nemesis's admin calls. Nodes are endpoints 0..n-1.
const Client = -1

// Link is an undirected link between two endpoints, normalized so that A < B.
type Link struct{ A, B int }

// NewLink returns the link between a and b.
func NewLink(a, b int) Link {
	if a > b {
		a, b = b, a
	}
	return Link{a, b}
}

func (l Link) String() string {
	name := func(e int) string {
		if e == Client {
			return "client"
		}
		return fmt.Sprintf("n%d", e+1)
	}
	return name(l.A) + "-" + name(l.B)
}

// LinkSet is a set of cut links.
type LinkSet map[Link]bool

// String lists the links in order, e.g. "{client-n1 n1-n2}".
func (s LinkSet) String() string {
	var ls []Link
	for l, cut := range s {
		if cut {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].A != ls[j].A {
			return ls[i].A < ls[j].A
		}
		return ls[i].B < ls[j].B
	})
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// NodeAddrs are where one node listens and what it advertises.
type NodeAddrs struct {
	Listen    string // --listen
	Advertise string // --advertise: what other nodes and the clients dial
	HTTP      string // --http
}

// Network places the nodes on separate hosts and cuts and heals the links between them.
//
// Invariant: after Apply(s) returns nil, exactly the links of s are cut (traffic between their
// endpoints stalls in both directions, new connections between them are not established) and every
// other link carries traffic.
type Network interface {
	// Mode names the implementation: "netns" or "loopback".
	Mode() string
	// Addrs returns node i's addresses; they never change during a run.
	Addrs(i int) NodeAddrs
	// Command returns the command that runs path with args as node i (inside its host).
	Command(i int, path string, args ...string) *exec.Cmd
	// Started tells the network the pid of node i's process (0: stopped).
	Started(i int, pid int)
	// Apply makes exactly the links of cut cut.
	Apply(cut LinkSet) error
	// Close heals everything and releases every resource the network holds (namespaces, listeners).
	Close() error
}
