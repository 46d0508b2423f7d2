// Package scenario runs scripted experiments on a local cluster (DESIGN.md §6). A scenario is a
// value in one table (table.go): the cluster and its disks, the data and the workload, the events
// fired at offsets of the run, the variants it is run with and what its report scores. One runner
// (run.go) runs any of them — each variant, or the scenario's policy on and then off, on a fresh
// cluster — and writes report.json and PNG timelines; Repeat runs a scenario several times, and
// package analysis states what the reports show together. The package never changes a node's code:
// what a scenario varies is configuration.
package scenario

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/scenario/shape"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Scenario is one experiment.
type Scenario struct {
	Name        string
	Description string

	// The cluster: Nodes nodes, each with a block cache of CacheBytes (0: 8 MiB) on Device (nil:
	// DefaultDevice; a pointer to zero Options: none, the machine's disk and page cache), configured
	// by KV (nil: the defaults).
	Nodes      int
	CacheBytes int64
	Device     *emudisk.Options
	KV         func(*benchutil.NodeConfig)

	// The data and the workload: Records records of ValueBytes (random, incompressible, with
	// RandomValues), pre-split into Splits equal ranges (0 or 1: one); Threads closed-loop clients,
	// ReadFraction of their operations reads of a zipfian-chosen key, the rest overwrites, for
	// Duration, the first Warmup of which (default 5 s) is left out of the steady state.
	Records, ValueBytes, Splits int
	RandomValues                bool
	Threads                     int
	ReadFraction                float64
	Duration, Warmup            time.Duration
	// Pace, when set, paces the threads after the warm-up at this fraction of the throughput their
	// closed loop reached over its second half (pace.go): the first run measures it, every run of
	// the report offers that rate. 0: closed loop throughout.
	Pace float64
	// Probe, with Pace, returns the threads to a closed loop from this offset to the end: a probe of
	// the cluster's capacity after the paced measurement, to set against the warm-up's (a join's
	// added capacity, which a paced load cannot show). 0: paced to the end.
	Probe time.Duration

	// Policy is the autopilot policy the scenario is about: switched on for one run and off for
	// another, or on for every variant; a scenario about no policy has variants. Pin sets other policies for every run (e.g. rebalance off,
	// so that only the scenario's policy moves leaderships).
	Policy   string
	Pin      map[string]bool
	Variants []Variant

	// Events fire at offsets of the measured workload; Toggle adds the switches of an ABBA schedule.
	// With Offsets, every run (variant, or policy on and off) is run once per offset, the events
	// after the warm-up moved by it and the order of the runs alternating: a comparison then rests
	// on the events at several phases of whatever the background does, not on one lucky window.
	Events  []Event
	Offsets []time.Duration
	Toggle  *Toggle
	// Surge adds client threads at its event (LoadSurge) and a controller that adds a node when
	// the latency its clients see stays over a target (StartController).
	Surge *Surge
	// Score is what the report measures beyond the timelines.
	Score Score
}

// Variant is one configuration a scenario is run with: its variants replace the policy on/off pair.
type Variant struct {
	Name string
	KV   func(*benchutil.NodeConfig)
	// Optional variants run only when --variants names them.
	Optional bool
	// PolicyOff runs the variant with the scenario's policy off: a control, the scenario's events
	// without the policy acting on them.
	PolicyOff bool
}

// Event is an action fired at an offset from the start of the measured workload.
type Event = shape.Event

// Toggle switches the scenario's policy in an ABBA schedule after the warm-up: Pairs pairs of
// windows of Window, (on, off | off, on | on, off | …), so that a linear drift over the run cancels
// within every two pairs. Each window is measured from Skip after its switch (the nodes read the
// switch every few seconds). The score is the policy's cost, 1 − throughput on / off, over the pairs.
type Toggle struct {
	Window time.Duration `json:"window_ns"`
	Pairs  int           `json:"pairs"`
	Skip   time.Duration `json:"skip_ns"`
}

// Surge is a load surge and the elasticity controller that answers it (join.go).
type Surge struct {
	// Threads are the client threads the surge adds.
	Threads int
	// LearnFor is how long the controller learns the steady latency after it starts; it adds the
	// node after TriggerWindows consecutive 2-s windows over its target.
	LearnFor       time.Duration
	TriggerWindows int
}

// Score names what a report measures beyond the timelines.
type Score string

const (
	// ScoreTask compares the workload while a task event ran with the steady state before it.
	ScoreTask Score = "task"
	// ScoreJoin measures a node's join as the incremental-join chapter does (JoinReport).
	ScoreJoin Score = "join"
	// ScoreReadHints measures a leadership change's cost and the nodes' caches (ReadHintsRun), or a
	// Toggle's paired cost.
	ScoreReadHints Score = "read-hints"
	// ScoreMove measures a replica move against its configured snapshot rate and checks the moved
	// copies (MoveReport), and the workload during it as a task window.
	ScoreMove Score = "move"
)

// DefaultDevice is the emulated disk every node of a scenario gets unless the scenario or the
// invocation says otherwise (storage/emudisk): no OS page cache, so the block cache is the node's
// only cache; 64 MiB/s each way, 2000 IOPS and 200 µs per operation, a modest network-attached SSD
// whose three copies fit within one small machine's real disk (shape.DefaultDevice).
var DefaultDevice = device(shape.DefaultDevice)

// device is d as the emulated device's options.
func device(d shape.Device) emudisk.Options {
	return emudisk.Options{NoPageCache: d.NoPageCache, ReadBytesPerSec: d.ReadBytesPerSec, WriteBytesPerSec: d.WriteBytesPerSec,
		IOPS: d.IOPS, Latency: d.Latency, ReadaheadBytes: d.ReadaheadBytes}
}

// fromShape is the scenario of sh's size, load and schedule; the caller adds what a real run needs
// beyond it (the policy, pins, variants, node settings, the score). A shape's link rate is applied
// by the variants' node settings (join), not here.
func fromShape(sh shape.Shape, desc string) Scenario {
	s := Scenario{Name: sh.Name, Description: desc, Nodes: sh.Nodes, CacheBytes: sh.CacheBytes,
		Records: sh.Records, ValueBytes: sh.ValueBytes, Splits: sh.Splits, Threads: sh.Threads, ReadFraction: sh.ReadFraction,
		Duration: sh.Duration, Warmup: sh.Warmup, Pace: sh.Pace, Probe: sh.Probe, Events: append([]Event(nil), sh.Events...)}
	if sh.Device != nil {
		d := device(*sh.Device)
		s.Device = &d
	}
	return s
}

// Lookup returns the named scenario of the table.
func Lookup(name string) (Scenario, bool) {
	for _, s := range scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// List returns the table, sorted by name.
func List() []Scenario {
	out := append([]Scenario(nil), scenarios...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Schedule describes the scenario's events for a listing: "8s transfer leader, 15s restart".
func (s Scenario) Schedule() string {
	var parts []string
	for _, e := range s.Events {
		parts = append(parts, fmt.Sprintf("%v %s", e.At, e.Do))
	}
	if len(s.Offsets) > 1 {
		parts = append(parts, fmt.Sprintf("moved by each of %v", s.Offsets))
	}
	if t := s.Toggle; t != nil {
		parts = append(parts, fmt.Sprintf("from %v %d ABBA pairs of %v windows", s.Warmup, t.Pairs, t.Window))
	}
	return strings.Join(parts, ", ")
}

// VariantNames lists the variants, the optional ones in brackets.
func (s Scenario) VariantNames() string {
	names := make([]string, len(s.Variants))
	for i, v := range s.Variants {
		names[i] = v.Name
		if v.Optional {
			names[i] = "[" + v.Name + "]"
		}
	}
	return strings.Join(names, ", ")
}
