package demo

import "syscall"

// childAttr puts a node in its own process group, so that Ctrl-C in the terminal reaches only the
// demo (which stops the nodes in order), and has the kernel send it SIGTERM if the demo dies without
// stopping it (SIGKILL, a crash): the node then stops cleanly and releases its data directory.
//
// Pdeathsig fires when the thread that started the child exits, not the process; Go only ends a
// thread whose goroutine exits while locked to it, which the demo's goroutines never do.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
