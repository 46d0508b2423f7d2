package storage

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// blockDeviceTicks returns a reader of the busy time (io_ticks) of the block device holding dir,
// from /sys/dev/block/MAJOR:MINOR/stat; nil when there is none (overlay or network filesystems,
// tmpfs: their st_dev names no block device).
func blockDeviceTicks(dir string) func() (time.Duration, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", major, minor)
	read := func() (time.Duration, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		return parseIOTicks(string(b))
	}
	if _, ok := read(); !ok {
		return nil
	}
	return read
}
