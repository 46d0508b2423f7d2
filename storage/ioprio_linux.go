//go:build linux

package storage

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Linux's I/O priorities (include/uapi/linux/ioprio.h): a class in the top bits of the value.
const (
	ioprioWhoProcess = 1 // with a thread id, that thread alone
	ioprioClassShift = 13
	ioprioClassIdle  = 3
)

// setThreadIdleIO puts the calling OS thread in the kernel's idle I/O class (its disk requests are
// served when no other class has any) and returns how to put back the priority it had. The caller
// holds the thread locked (runtime.LockOSThread) until it has restored it.
func setThreadIdleIO() (restore func() error, err error) {
	tid := unix.Gettid()
	prev, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
	if errno != 0 {
		return func() error { return nil }, fmt.Errorf("ioprio_get thread %d: %w", tid, errno)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), ioprioClassIdle<<ioprioClassShift); errno != 0 {
		return func() error { return nil }, fmt.Errorf("ioprio_set idle thread %d: %w", tid, errno)
	}
	return func() error {
		if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), prev); errno != 0 {
			return fmt.Errorf("ioprio_set thread %d back to %#x: %w", tid, prev, errno)
		}
		return nil
	}, nil
}

// threadIOPrio is the calling OS thread's I/O priority value (class << 13 | level), for tests.
func threadIOPrio() (int, error) {
	p, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(unix.Gettid()), 0)
	if errno != 0 {
		return 0, fmt.Errorf("ioprio_get: %w", errno)
	}
	return int(p), nil
}
