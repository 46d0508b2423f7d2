package kv

import "testing"

func TestHintLoad(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cpu, disk       float64
		serves          bool
		weight, want    float64
		diskMustNotRead bool
	}{
		{name: "idle", cpu: 0.1, disk: 0.1, serves: true, weight: 0.85, want: 0.1},
		{name: "saturated disk of a serving node", cpu: 0.3, disk: 1, serves: true, weight: 0.85, want: 0.85},
		{name: "half-busy disk", cpu: 0.2, disk: 0.5, serves: true, weight: 0.85, want: 0.425},
		{name: "CPU above the disk's share", cpu: 0.95, disk: 1, serves: true, weight: 0.85, want: 0.95, diskMustNotRead: true},
		{name: "node leads nothing", cpu: 0.3, disk: 1, serves: false, weight: 0.85, want: 0.3, diskMustNotRead: true},
		{name: "disk not counted", cpu: 0.3, disk: 1, serves: true, weight: -1, want: 0.3, diskMustNotRead: true},
	} {
		read := false
		f := hintLoad(func() float64 { return tc.cpu }, func() float64 { read = true; return tc.disk },
			func() bool { return tc.serves }, tc.weight)
		if got := f(); got != tc.want {
			t.Errorf("%s: load = %v, want %v", tc.name, got, tc.want)
		}
		if tc.diskMustNotRead && read {
			t.Errorf("%s: the disk was sampled although it could not count", tc.name)
		}
	}
}

func TestHintsConfigDiskWeightDefault(t *testing.T) {
	var c HintsConfig
	c.setDefaults()
	if c.DiskWeight != DefaultHintsDiskWeight {
		t.Fatalf("DiskWeight default = %v, want %v", c.DiskWeight, DefaultHintsDiskWeight)
	}
	c = HintsConfig{DiskWeight: -1}
	c.setDefaults()
	if c.DiskWeight != -1 {
		t.Fatalf("DiskWeight -1 became %v", c.DiskWeight)
	}
	if err := (HintsConfig{DiskWeight: 1.5}).Validate(); err == nil {
		t.Fatal("Validate accepted a disk weight of 1.5")
	}
	if err := (HintsConfig{DiskWeight: -1}).Validate(); err != nil {
		t.Fatalf("Validate refused a negative disk weight (off): %v", err)
	}
}

func TestHintsConfigDiskReadShare(t *testing.T) {
	var c HintsConfig
	c.setDefaults()
	if c.DiskReadShare != DefaultHintsDiskReadShare {
		t.Fatalf("DiskReadShare default = %v, want %v", c.DiskReadShare, DefaultHintsDiskReadShare)
	}
	c = HintsConfig{DiskReadShare: -1}
	c.setDefaults()
	if c.DiskReadShare != -1 {
		t.Fatalf("DiskReadShare -1 (no budget) became %v", c.DiskReadShare)
	}
	if err := (HintsConfig{DiskReadShare: 1.5}).Validate(); err == nil {
		t.Fatal("Validate accepted a disk read share of 1.5")
	}
}

// Replays are budgeted only on a node that serves clients from a saturated disk.
func TestDiskSaturated(t *testing.T) {
	for _, tc := range []struct {
		disk   float64
		serves bool
		want   bool
	}{
		{1, true, true}, {0.9, true, true}, {0.89, true, false}, {1, false, false},
	} {
		got := diskSaturated(func() float64 { return tc.disk }, func() bool { return tc.serves })()
		if got != tc.want {
			t.Errorf("disk %v, serves %v: saturated = %v, want %v", tc.disk, tc.serves, got, tc.want)
		}
	}
}
