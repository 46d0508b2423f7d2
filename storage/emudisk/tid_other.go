//go:build !linux

package emudisk

// threadID is unknown off Linux: no thread can be marked idle-class there, and every operation is
// the foreground's.
func threadID() (int, bool) { return 0, false }
