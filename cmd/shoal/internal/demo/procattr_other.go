//go:build !linux

package demo

import "syscall"

// childAttr puts a node in its own process group, so that Ctrl-C in the terminal reaches only the
// demo, which stops the nodes in order. Without Linux's parent-death signal, nodes outlive a demo
// killed with SIGKILL: stop them by the PID their data directory's lock error names.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
