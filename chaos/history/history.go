// Package history owns the porcupine model of a Shoal key (get, put, compare-and-swap and delete, with
// writes whose outcome is unknown) and the recorder that turns concurrent client calls into a history
// porcupine can check. The in-process linearizability tests (test/) and the multi-process chaos suite
// (chaos/) share it. It never talks to a cluster: callers make the calls and report what they saw.
//
// Indeterminate writes (the client returned ErrAmbiguous/ErrTimeout/ErrInternal or a context error: the
// write may or may not have been applied) are recorded with Output.Unknown and a Return time after every
// other event of the history, the documented way to model a crashed or timed-out call: the checker may
// then linearize the write anywhere after its call, including "never" (after the last observation).
// Definitely-failed operations (not proposed, per the client's contract) and failed reads are left out
// of the history: they had no effect and observed nothing.
package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/client"
)

// Kind is the kind of an operation on one key.
type Kind uint8

// The operations of the model.
const (
	Get Kind = iota
	Put
	CAS
	Delete
)

// String names the kind as the counters do ("get", "put", "cas", "delete").
func (k Kind) String() string {
	switch k {
	case Get:
		return "get"
	case Put:
		return "put"
	case CAS:
		return "cas"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Input is one call on one key.
type Input struct {
	Kind         Kind
	Key          string
	Value        string // put/cas: the new value
	Expected     string // cas: the expected value (unless ExpectAbsent)
	ExpectAbsent bool   // cas: swap only if the key does not exist
}

// Output is what the call returned.
type Output struct {
	Unknown bool   // a write whose outcome is unknown
	Found   bool   // get: the key exists; cas: the key exists (when not swapped); delete: the key existed
	Value   string // get: the value; cas: the current value (when not swapped)
	Swapped bool   // cas
}

// State is the state of one key.
type State struct {
	Found bool
	Value string
}

func (in Input) String() string {
	switch in.Kind {
	case Get:
		return fmt.Sprintf("get(%s)", in.Key)
	case Put:
		return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
	case CAS:
		if in.ExpectAbsent {
			return fmt.Sprintf("cas(%s, <absent> → %s)", in.Key, in.Value)
		}
		return fmt.Sprintf("cas(%s, %s → %s)", in.Key, in.Expected, in.Value)
	default:
		return fmt.Sprintf("delete(%s)", in.Key)
	}
}

func (s State) String() string {
	if !s.Found {
		return "<absent>"
	}
	return s.Value
}

// Describe renders one operation for porcupine's visualization.
func Describe(input, output interface{}) string {
	in, out := input.(Input), output.(Output)
	if out.Unknown {
		return in.String() + " → ?"
	}
	switch in.Kind {
	case Get:
		return in.String() + " → " + State{out.Found, out.Value}.String()
	case Put:
		return in.String() + " → ok"
	case CAS:
		if out.Swapped {
			return in.String() + " → swapped"
		}
		return in.String() + " → not swapped, current " + State{out.Found, out.Value}.String()
	default:
		return fmt.Sprintf("%s → found=%v", in, out.Found)
	}
}

// Model is a register per key with get, put, compare-and-swap and delete, partitioned by key.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return State{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st, in, out := state.(State), input.(Input), output.(Output)
		switch in.Kind {
		case Get:
			return out.Found == st.Found && (!st.Found || out.Value == st.Value), st
		case Put:
			return true, State{Found: true, Value: in.Value}
		case Delete:
			if out.Unknown {
				return true, State{}
			}
			return out.Found == st.Found, State{}
		case CAS:
			match := (in.ExpectAbsent && !st.Found) || (!in.ExpectAbsent && st.Found && st.Value == in.Expected)
			next := st
			if match {
				next = State{Found: true, Value: in.Value}
			}
			if out.Unknown {
				return true, next
			}
			if out.Swapped {
				return match, next
			}
			return !match && out.Found == st.Found && (!st.Found || out.Value == st.Value), st
		}
		return false, st
	},
	DescribeOperation: Describe,
	DescribeState:     func(state interface{}) string { return state.(State).String() },
}

// Outcome classifies a client error.
type Outcome int

// The outcomes of a call.
const (
	OutOK       Outcome = iota
	OutDefinite         // the operation certainly had no effect
	OutUnknown          // a write may or may not have been applied
	OutInvalid          // the request was rejected as malformed: a test bug or a server bug
)

// Classify maps an error of the client package to an Outcome, following the client's contract.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OutOK
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrNotLeader),
		errors.Is(err, client.ErrRangeMoved), errors.Is(err, client.ErrOverloaded):
		return OutDefinite
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrUnauthenticated):
		return OutInvalid
	default: // ErrAmbiguous, ErrTimeout, ErrInternal, context errors, anything unforeseen
		return OutUnknown
	}
}

// History records operations from many goroutines. Times are nanoseconds on the monotonic clock
// since New.
type History struct {
	t0 time.Time

	mu       sync.Mutex
	ops      []porcupine.Operation
	unknown  []int // indexes in ops of writes with unknown outcome (Return fixed up in Finish)
	nextCID  int
	counts   map[string]int
	internal []string
}

// New returns an empty history whose NewClientID starts at firstClientID (callers number their first
// clients 0..firstClientID-1 themselves).
func New(firstClientID int) *History {
	return &History{t0: time.Now(), nextCID: firstClientID, counts: map[string]int{}}
}

// Now is the current time of the history.
func (h *History) Now() int64 { return int64(time.Since(h.t0)) }

// NewClientID allocates a fresh porcupine client id: a goroutine whose write is left pending forever
// continues under a new id, so the visualization never shows one client with overlapping calls.
func (h *History) NewClientID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextCID
	h.nextCID++
	return id
}

// Count adds one to the counter what.
func (h *History) Count(what string) {
	h.mu.Lock()
	h.counts[what]++
	h.mu.Unlock()
}

// Counts returns a copy of the counters ("put ok", "cas unknown", "get failed", …).
func (h *History) Counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}

// Internal returns the operations that failed with ErrInternal (recorded as unknown outcomes).
func (h *History) Internal() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.internal...)
}

// Add records a completed call made by client cid between call and ret (History.Now values) that
// returned out and err. It returns whether the calling goroutine must switch to a new client id (its
// write stays pending forever), and an error if the call was refused as invalid.
func (h *History) Add(cid int, in Input, out Output, call, ret int64, err error) (pending bool, bad error) {
	kind := in.Kind.String()
	oc := Classify(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch oc {
	case OutOK:
		h.counts[kind+" ok"]++
		h.ops = append(h.ops, porcupine.Operation{ClientId: cid, Input: in, Call: call, Output: out, Return: ret})
		return false, nil
	case OutDefinite:
		h.counts[kind+" failed (definite)"]++
		return false, nil
	case OutInvalid:
		return false, fmt.Errorf("%s: unexpected invalid-argument error: %w", in, err)
	}
	if errors.Is(err, client.ErrInternal) {
		h.internal = append(h.internal, fmt.Sprintf("%s: %v", in, err))
	}
	if in.Kind == Get {
		h.counts["get failed"]++
		return false, nil
	}
	h.counts[kind+" unknown"]++
	h.unknown = append(h.unknown, len(h.ops))
	h.ops = append(h.ops, porcupine.Operation{ClientId: cid, Input: in, Call: call, Output: Output{Unknown: true}})
	return true, nil
}

// Finish sets the return time of every pending write after the end of the history and returns a copy
// of the history.
func (h *History) Finish() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var end int64
	for _, op := range h.ops {
		end = max(end, op.Call, op.Return)
	}
	for _, i := range h.unknown {
		h.ops[i].Return = end + 1
	}
	return append([]porcupine.Operation(nil), h.ops...)
}

// Check runs porcupine over ops for at most timeout. Unless the result is Ok it writes porcupine's
// HTML visualization of the history to a file under dir (the system's temporary directory if dir is
// empty) named after name, and returns its path.
func Check(ops []porcupine.Operation, timeout time.Duration, dir, name string) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	if res == porcupine.Ok {
		return res, "", nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	name = strings.NewReplacer("/", "_", " ", "_").Replace(name)
	path := filepath.Join(dir, fmt.Sprintf("shoal-history-%s-%d.html", name, time.Now().UnixNano()))
	if err := porcupine.VisualizePath(Model, info, path); err != nil {
		return res, "", fmt.Errorf("write the visualization of the history: %w", err)
	}
	return res, path, nil
}
