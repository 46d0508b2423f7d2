// Package stream is the stream-processing API of Shoal: jobs registered by name in Go (an input of
// events, a key function, a handler with read and write access to state kept in Shoal, an output), the
// code that applies one event to its state exactly once (Apply), and the producer's side that routes
// events to the node leading their key's range (Ingester).
//
// A job's state is a span of kv keys. The partitioner of the stream is the store's range map: an event
// goes to the task of the range holding its key, on the node leading that range, so that the
// handler's state reads are leaseholder reads on that node and its writes raft proposals there.
// Every state value carries the position of the last event applied to its key; an event whose
// position the state already holds is not applied again, so a replay after a hand-off, a timeout or
// an ambiguous answer is harmless.
//
// The package owns the job API, the value envelope and the exactly-once rule. It never places tasks
// or ranges (the node's host serves whatever reaches it; ranges are kv's) and never retries a write
// behind the caller's back except through a position check.
package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Event is one event of a job's input.
type Event struct {
	// Key is the job's key function's value: the state key the event belongs to (its primary key).
	Key []byte
	// Position is the event's place among its key's events: 1, 2, 3, … in the producer's order.
	Position uint64
	// Value is the event's payload.
	Value []byte
}

// Handler applies one event to the job's state. Its writes (State.Put, State.Delete) are committed
// together with the event's position, atomically, after it returns; they must fall in the range of the
// event's key (keys sharing its range). It must be deterministic in what it reads: an attempt whose
// reads changed before the commit is run again. The output is handed back to the producer with the
// event's acknowledgement. An error wrapped by Refuse fails the event for good; any other is retried.
type Handler func(ctx context.Context, s *State, e Event) (output []byte, err error)

// Job is a stream job: events keyed into a span of state, and what to do with each.
type Job struct {
	// Name identifies the job on every node and producer (they link the same registry).
	Name string
	// Start and End bound the job's state span [Start, End); every key Key returns lies in it.
	Start, End []byte
	// Key maps an event's payload to its state key (the partitioning key).
	Key func(value []byte) ([]byte, error)
	// Handle applies an event.
	Handle Handler
}

// ErrRefused marks a handler's error that no retry can fix (a malformed event).
var ErrRefused = errors.New("event refused by the job")

// Refuse wraps err so that the event fails for good instead of being retried.
func Refuse(err error) error { return fmt.Errorf("%w: %w", ErrRefused, err) }

var (
	registryMu sync.RWMutex
	registry   = map[string]*Job{}
)

// Register adds a job to the process's registry; it panics on a duplicate or incomplete job (a
// programming error found at start-up).
func Register(j *Job) {
	if j.Name == "" || j.Key == nil || j.Handle == nil || len(j.End) == 0 {
		panic(fmt.Sprintf("stream: job %q needs a name, a key function, a handler and a bounded span", j.Name))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[j.Name]; dup {
		panic(fmt.Sprintf("stream: job %q registered twice", j.Name))
	}
	registry[j.Name] = j
}

// Lookup returns the job registered under name.
func Lookup(name string) (*Job, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	j, ok := registry[name]
	return j, ok
}

// Names lists the registered jobs, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
