//go:build !linux

package emudisk

import "errors"

const (
	fadvDontNeed = 4
	fadvRandom   = 1
)

// fadvise is unsupported off Linux: the page-cache bypass then only counts failed calls.
func fadvise(fd uintptr, off, n int64, advice int) error {
	return errors.ErrUnsupported
}
