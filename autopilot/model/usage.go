package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Access is what a range's leader measured of its reads for the usage model (node/accessstats,
// plan/usage): over its last report's window, the point reads measured by their block loads and
// those the block cache served alone, the rows and blocks its scans read per second, and its
// block-access histogram.
type Access struct {
	MeasuredReads, MeasuredHits uint64
	ScanRowsQPS, ScanBlocksQPS  float64
	// Hist: Hist[i].Blocks blocks, each read Hist[i].Rate times a second.
	Hist []AccessBucket
}

// AccessBucket is a group of a range's blocks read at the same rate.
type AccessBucket struct {
	Rate, Blocks float64
}

// HitRatio is the share of the measured point reads the cache served alone (false: none measured).
func (a *Access) HitRatio() (float64, bool) {
	if a == nil || a.MeasuredReads == 0 {
		return 0, false
	}
	return float64(a.MeasuredHits) / float64(a.MeasuredReads), true
}

// CacheBlocks is how many data blocks the node's block cache holds: its room less what index and
// filter blocks take (0: not reported). A node whose index and filter blocks fill it holds a
// block at least (a node that reports a cache is not one that reports none).
func (n *Node) CacheBlocks() float64 {
	if n.BlockBytes == 0 {
		return 0
	}
	if n.IndexFilterBytes >= n.CacheBytes {
		return 1
	}
	return float64(n.CacheBytes-n.IndexFilterBytes) / float64(n.BlockBytes)
}

// MeasuredUsage is the node's usage as the usage model counts it: its CPU as a share of its cores
// plus the share of time its disk was busy (the thesis's CPU user+sys and I/O wait, §5.2).
func (n *Node) MeasuredUsage() float64 {
	cpu := 0.0
	if n.CPUCores > 0 {
		cpu = n.CPUPercent / 100 / n.CPUCores
	}
	return cpu + n.DiskBusy
}

// parseCache reads a node's cache=SIZE/BLOCK[/INDEXFILTER] (ParseCluster): INDEXFILTER is the
// part of the cache index and filter blocks take.
func parseCache(n *Node, v string) error {
	f := strings.Split(v, "/")
	if len(f) < 2 || len(f) > 3 {
		return fmt.Errorf("cache: want SIZE/BLOCK[/INDEXFILTER], e.g. 64MiB/4KiB or 64MiB/4KiB/8MiB")
	}
	var err error
	if n.CacheBytes, err = ParseBytes(f[0]); err != nil {
		return fmt.Errorf("cache: %v", err)
	}
	if n.BlockBytes, err = ParseBytes(f[1]); err != nil {
		return fmt.Errorf("cache block: %v", err)
	}
	if len(f) == 3 {
		if n.IndexFilterBytes, err = ParseBytes(f[2]); err != nil {
			return fmt.Errorf("cache index and filter: %v", err)
		}
	}
	return nil
}

// parseAccess reads a range's hist=, hits= and scanblocks= (ParseCluster).
func parseAccess(r *Range, k, v string) error {
	if r.Access == nil {
		r.Access = &Access{}
	}
	a := r.Access
	switch k {
	case "hist":
		for _, b := range strings.Split(v, ",") {
			rate, blocks, ok := strings.Cut(b, "x")
			x, err1 := strconv.ParseFloat(rate, 64)
			y, err2 := strconv.ParseFloat(blocks, 64)
			if !ok || err1 != nil || err2 != nil {
				return fmt.Errorf("hist: want RATExBLOCKS,... got %q", b)
			}
			a.Hist = append(a.Hist, AccessBucket{Rate: x, Blocks: y})
		}
	case "hits":
		h, m, ok := strings.Cut(v, "/")
		x, err1 := strconv.ParseUint(h, 10, 64)
		y, err2 := strconv.ParseUint(m, 10, 64)
		if !ok || err1 != nil || err2 != nil || x > y {
			return fmt.Errorf("hits: want HITS/MEASURED, got %q", v)
		}
		a.MeasuredHits, a.MeasuredReads = x, y
	case "scanblocks":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("scanblocks: %v", err)
		}
		a.ScanBlocksQPS = x
	case "scanrows":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("scanrows: %v", err)
		}
		a.ScanRowsQPS = x
	}
	return nil
}
