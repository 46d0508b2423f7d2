//go:build !linux

package storage

import "errors"

// setThreadIdleIO is unsupported off Linux: the jobs' reads keep the thread's I/O priority (the
// emulated device's idle class needs thread ids too, so it is off as well).
func setThreadIdleIO() (restore func() error, err error) {
	return func() error { return nil }, nil
}

// threadIOPrio is unknown off Linux.
func threadIOPrio() (int, error) { return 0, errors.ErrUnsupported }
