package netfault

import (
	"errors"
	"os/exec"
)

// plainNet runs the nodes on loopback with no proxy, for runs that cut no links and must not pay a
// proxy's copies (the overload benchmark).
type plainNet struct{ addrs []NodeAddrs }

// NewPlain reserves loopback ports for n nodes; its Apply refuses to cut any link.
func NewPlain(n int) (Network, error) {
	pn := &plainNet{}
	for i := 0; i < n; i++ {
		listen, err := freePort()
		if err != nil {
			return nil, err
		}
		httpAddr, err := freePort()
		if err != nil {
			return nil, err
		}
		pn.addrs = append(pn.addrs, NodeAddrs{Listen: listen, Advertise: listen, HTTP: httpAddr})
	}
	return pn, nil
}

func (pn *plainNet) Mode() string          { return "loopback (no proxy)" }
func (pn *plainNet) Addrs(i int) NodeAddrs { return pn.addrs[i] }
func (pn *plainNet) Command(_ int, path string, args ...string) *exec.Cmd {
	return exec.Command(path, args...)
}
func (pn *plainNet) Started(int, int) {}
func (pn *plainNet) Apply(cut LinkSet) error {
	if len(cut) > 0 {
		return errors.New("plain loopback network: links cannot be cut")
	}
	return nil
}
func (pn *plainNet) Close() error { return nil }
