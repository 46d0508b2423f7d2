package readhints

import (
	"testing"
	"time"
)

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

// The disk settings of read hints: defaults, a negative value kept as "off", and out-of-range values refused.
func TestConfigDiskSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  func(Config) float64
		set  func(*Config, float64)
		def  float64
	}{
		{"DiskWeight", func(c Config) float64 { return c.DiskWeight }, func(c *Config, v float64) { c.DiskWeight = v }, DefaultDiskWeight},
		{"DiskReadShare", func(c Config) float64 { return c.DiskReadShare }, func(c *Config, v float64) { c.DiskReadShare = v }, DefaultDiskReadShare},
	} {
		var c Config
		c = c.WithDefaults()
		if got := tc.get(c); got != tc.def {
			t.Errorf("%s default = %v, want %v", tc.name, got, tc.def)
		}
		c = Config{}
		tc.set(&c, -1)
		c = c.WithDefaults()
		if got := tc.get(c); got != -1 {
			t.Errorf("%s -1 (off) became %v", tc.name, got)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("Validate refused %s -1 (off): %v", tc.name, err)
		}
		c = Config{}
		tc.set(&c, 1.5)
		if err := c.Validate(); err == nil {
			t.Errorf("Validate accepted %s 1.5", tc.name)
		}
	}
}

// The switch interval: 2 s by default, at least 10 ms, never negative.
func TestConfigSwitchInterval(t *testing.T) {
	var c Config
	c = c.WithDefaults()
	if c.SwitchInterval != DefaultSwitchInterval {
		t.Fatalf("default %v, want %v", c.SwitchInterval, DefaultSwitchInterval)
	}
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {10 * time.Millisecond, true}, {time.Second, true}, {time.Millisecond, false}, {-time.Second, false}} {
		c := Config{SwitchInterval: tc.d}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("SwitchInterval %v: Validate %v, want ok=%v", tc.d, err, tc.ok)
		}
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
