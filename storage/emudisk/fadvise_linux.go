//go:build linux

package emudisk

import "golang.org/x/sys/unix"

const (
	fadvDontNeed = unix.FADV_DONTNEED
	fadvRandom   = unix.FADV_RANDOM
)

func fadvise(fd uintptr, off, n int64, advice int) error {
	return unix.Fadvise(int(fd), off, n, advice)
}
