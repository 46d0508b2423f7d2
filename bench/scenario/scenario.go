// Package scenario runs scripted experiments on a local cluster: a workload plus scheduled events
// (admin operations, a node killed and restarted, policy switches), twice — the scenario's autopilot
// policy on, then off — and writes report.json and PNG timelines (DESIGN.md §6). A scenario is data:
// a Scenario value registered by name; later issues add theirs with Register.
package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Env is what an event acts on: the running cluster and a client connected to it.
type Env struct {
	c      *cluster
	Client *client.Client
	// Records is how many records the run loaded (the scenario's, or --records).
	Records int
	// SurgeThreads is how many client threads a surge adds (the scenario's, or --surge-threads).
	SurgeThreads int
	// values makes the values the run's clients write (fixed or random: --random-values).
	values values
	killed []int
}

// Action is what an event does. It returns a short description of what it did, for the report.
type Action func(ctx context.Context, env *Env) (string, error)

// Event is an action fired at an offset from the start of the measured workload.
type Event struct {
	At   time.Duration
	What string // label for the report and the plots; the action's own description is appended
	Do   Action
	// Task marks an action that runs a background task and returns when it is over: the report
	// compares the workload from its start to its end with the steady state before it.
	Task bool
}

// Scenario is one experiment.
type Scenario struct {
	Name        string
	Description string
	Nodes       int
	Records     int
	Duration    time.Duration
	Threads     int
	ValueBytes  int
	// RandomValues writes fresh random (incompressible) values instead of one fixed pattern of
	// letters (values.go); `--random-values` sets it for any scenario.
	RandomValues bool
	// ReadFraction of operations are reads of a zipfian-chosen key; the rest overwrite one.
	ReadFraction float64
	// Policy is the autopilot policy switched on for the first run and off for the second.
	Policy string
	Events []Event
	// Device is each node's emulated disk (storage/emudisk). Nil: DefaultDevice; a pointer to zero
	// Options: none (the nodes share the machine's disk and page cache).
	Device *emudisk.Options
	// CacheBytes is each node's block cache (0: Options.CacheBytes, default 8 MiB).
	CacheBytes int64
	// Splits pre-splits the user key space into this many equal ranges after loading (0 or 1: one).
	Splits int
	// SurgeThreads is the client threads the scenario's load surge adds (0: it has none).
	SurgeThreads int
	// Pin sets other policies for both runs (e.g. rebalance off, so that only the scenario's policy
	// moves leaderships).
	Pin map[string]bool
	// Warmup is the start of the run left out of the steady state (default 5s).
	Warmup time.Duration
	// KV adjusts every node's configuration (nil: the defaults).
	KV func(*kv.Config)
	// Variants, when set, replace the policy on/off pair: the scenario runs once per variant, each
	// with its own node configuration (e.g. the join strategies), the scenario's policy on.
	Variants []Variant
}

// Variant is one configuration a scenario is run with.
type Variant struct {
	Name string
	KV   func(*kv.Config)
	// Optional variants run only when --variants names them.
	Optional bool
	// LBaseMaxBytes, when above 0, sets every engine's base-level target (storage.Options.LBaseMaxBytes).
	LBaseMaxBytes int64
	// PolicyOff runs the variant with the scenario's policy off: a control, the scenario's events
	// without the policy acting on them.
	PolicyOff bool
	// Pin switches further policies for this variant after the scenario's own Pin (e.g. a mechanism
	// on top of the scenario's). The scenario's Policy is set after it: pin others only.
	Pin map[string]bool
}

// DefaultDevice is the emulated disk every node of a scenario gets unless the scenario or the
// invocation says otherwise (docs/design/emudisk.md explains the numbers): no OS page cache, so the
// block cache is the node's only cache; 64 MiB/s each way, 2000 IOPS and 200 µs per operation, a
// modest network-attached SSD whose three copies fit within one small machine's real disk.
var DefaultDevice = emudisk.Options{
	NoPageCache:      true,
	ReadBytesPerSec:  64 << 20,
	WriteBytesPerSec: 64 << 20,
	IOPS:             2000,
	Latency:          200 * time.Microsecond,
}

var (
	regMu    sync.Mutex
	registry = map[string]Scenario{}
)

// Register adds a scenario; it panics on a duplicate name.
func Register(s Scenario) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[s.Name]; dup {
		panic("scenario: duplicate " + s.Name)
	}
	registry[s.Name] = s
}

// Lookup returns the named scenario.
func Lookup(name string) (Scenario, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// List returns every registered scenario, sorted by name.
func List() []Scenario {
	regMu.Lock()
	defer regMu.Unlock()
	var out []Scenario
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func init() {
	Register(Scenario{
		Name:         "leader-transfer",
		Description:  "3 nodes; at t=8s the user range's leadership moves to another node; policy rebalance",
		Nodes:        3,
		Records:      20000,
		Duration:     20 * time.Second,
		Threads:      8,
		ValueBytes:   256,
		ReadFraction: 0.9,
		Policy:       "rebalance",
		Events:       []Event{{At: 8 * time.Second, What: "transfer leader", Do: TransferUserLeader()}},
	})
	Register(Scenario{
		Name:         "node-kill",
		Description:  "3 nodes; at t=8s the user range's leader is killed, at t=15s restarted; policy replicate",
		Nodes:        3,
		Records:      20000,
		Duration:     25 * time.Second,
		Threads:      8,
		ValueBytes:   256,
		ReadFraction: 0.9,
		Policy:       "replicate",
		Events: []Event{
			{At: 8 * time.Second, What: "kill leader", Do: KillUserLeader()},
			{At: 15 * time.Second, What: "restart", Do: RestartKilled()},
		},
	})
}

// TransferUserLeader moves the user range's leadership to the next live voter.
func TransferUserLeader() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		r, err := userRange(ctx, env.Client)
		if err != nil {
			return "", err
		}
		var target uint64
		for _, rd := range r.GetDesc().GetReplicas() {
			if !rd.Learner && rd.NodeId != r.LeaderNodeId && env.c.indexOf(rd.NodeId) >= 0 {
				target = rd.NodeId
				break
			}
		}
		if target == 0 {
			return "", fmt.Errorf("no voter to transfer range %d to", r.GetDesc().GetRangeId())
		}
		if err := env.Client.TransferLeader(ctx, r.GetDesc().GetRangeId(), target); err != nil {
			return "", err
		}
		return fmt.Sprintf("r%d n%d->n%d", r.GetDesc().GetRangeId(), r.LeaderNodeId, target), nil
	}
}

// KillUserLeader kills the node leading the user range.
func KillUserLeader() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		r, err := userRange(ctx, env.Client)
		if err != nil {
			return "", err
		}
		i := env.c.indexOf(r.LeaderNodeId)
		if i < 0 {
			return "", fmt.Errorf("leader n%d of range %d is not a live local node", r.LeaderNodeId, r.GetDesc().GetRangeId())
		}
		env.c.kill(i)
		env.killed = append(env.killed, i)
		return fmt.Sprintf("n%d", r.LeaderNodeId), nil
	}
}

// RestartKilled restarts every node killed so far.
func RestartKilled() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		var done []string
		for _, i := range env.killed {
			if err := env.c.restart(ctx, i); err != nil {
				return strings.Join(done, ","), err
			}
			done = append(done, fmt.Sprintf("n%d", env.c.nodes[i].kv.NodeID()))
		}
		env.killed = nil
		return strings.Join(done, ","), nil
	}
}

// SetPolicy switches an autopilot policy.
func SetPolicy(name string, on bool) Action {
	return func(ctx context.Context, env *Env) (string, error) {
		return fmt.Sprintf("%s=%v", name, on), env.Client.SetPolicy(ctx, name, on)
	}
}

// decisionsSince reads the autopilot's decision log and returns the entries proposed at or after
// start, oldest first.
func decisionsSince(ctx context.Context, env *Env, start time.Time) ([]decisions.Entry, error) {
	_, raw, err := env.Client.Decisions(ctx)
	if err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	var ds []decisions.Entry
	if err := json.Unmarshal(raw, &ds); err != nil {
		return nil, fmt.Errorf("decision log: %w", err)
	}
	out := ds[:0]
	for _, d := range ds {
		if !d.Time.Before(start) {
			out = append(out, d)
		}
	}
	return out, nil
}
