//go:build linux

package emudisk

import "golang.org/x/sys/unix"

// threadID is the calling OS thread's id (gettid: a system call, no vDSO).
func threadID() (int, bool) { return unix.Gettid(), true }
