package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// Mode says where a producer sends each event.
type Mode int

const (
	// Aligned sends an event to the node leading its key's range (the range map is the partitioner).
	Aligned Mode = iota
	// Unaligned sends it to a node chosen by a hash of its key among the live nodes, regardless of
	// leaders: the stream processor's own partitioner, the baseline.
	Unaligned
	// Placed sends it to the node that led its key's range when the producer first looked the range
	// up, and keeps sending there however the range later splits or moves (only a failed call makes
	// it look again): tasks placed aligned once and never migrated, the second baseline. The node
	// applies the events it gets wherever their state is (remote once the leadership has moved).
	Placed
)

func (m Mode) String() string {
	switch m {
	case Unaligned:
		return "unaligned"
	case Placed:
		return "placed"
	}
	return "aligned"
}

// ParseMode reads "aligned", "unaligned" or "placed".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "aligned":
		return Aligned, nil
	case "unaligned":
		return Unaligned, nil
	case "placed":
		return Placed, nil
	}
	return Aligned, fmt.Errorf("mode %q: want aligned, unaligned or placed", s)
}

// IngesterConfig configures a producer.
type IngesterConfig struct {
	// Client looks ranges and nodes up (required).
	Client *client.Client
	// DialOptions for the nodes' Streams service (default: insecure).
	DialOptions []grpc.DialOption
	// AuthToken, if the cluster requires one.
	AuthToken string
	Mode      Mode
	// MaxBatch bounds the events of one Ingest call (default 512).
	MaxBatch int
	// CallTimeout bounds one Ingest call (default DefaultCallTimeout). A call that outlives it is
	// abandoned and its events are sent again (a replay is harmless): without a bound, one call
	// that never returns (a node wedged, a connection that stalls) held up every later event.
	CallTimeout time.Duration
	// Resume makes Send read the position a key's state holds the first time it sees the key, and
	// go on after it: a producer that starts again (a new process) does not reuse positions.
	Resume bool
}

// DefaultCallTimeout bounds an Ingest call when IngesterConfig.CallTimeout is not set: a batch's
// runs are each a read and a raft write, well within it on a healthy node.
const DefaultCallTimeout = 10 * time.Second

// Ack is an event's outcome: APPLIED or DUPLICATE (its effect is in the state once), or FAILED.
type Ack struct {
	Key      []byte
	Position uint64
	Status   pb.IngestResult_Status
	Output   []byte
	Err      string // FAILED: why
}

// Ingester produces events of one job: it gives each key's events positions 1, 2, 3, …, routes them by
// key and sends each again, with its position, until it is acknowledged. One Ingester per key: two
// producers of one key would reuse its positions.
type Ingester struct {
	cfg    IngesterConfig
	job    *Job
	routes routeCache

	mu    sync.Mutex
	next  map[string]uint64
	conns map[string]*grpc.ClientConn
	nodes []string // live nodes' addresses by id (Unaligned)
}

// NewIngester returns a producer of the registered job named job.
func NewIngester(cfg IngesterConfig, job string) (*Ingester, error) {
	j, ok := Lookup(job)
	if !ok {
		return nil, fmt.Errorf("no stream job %q in this binary (jobs: %v)", job, Names())
	}
	if cfg.Client == nil {
		return nil, errors.New("stream ingester: no client")
	}
	if len(cfg.DialOptions) == 0 {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	// gRPC's default reconnect backoff (1 s growing to 2 min) leaves the connection to a node that
	// was down for seconds failing for seconds more after it serves again, while it leads ranges
	// again: redial soon, as the client does.
	cfg.DialOptions = append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	})}, cfg.DialOptions...)
	return &Ingester{cfg: cfg, job: j, next: map[string]uint64{}, conns: map[string]*grpc.ClientConn{}}, nil
}

// Close closes the ingester's connections.
func (in *Ingester) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	var errs []error
	for _, c := range in.conns {
		errs = append(errs, c.Close())
	}
	in.conns = map[string]*grpc.ClientConn{}
	return errors.Join(errs...)
}

// Events turns payloads into events: each key's next positions, in order.
func (in *Ingester) Events(values [][]byte) ([]Event, error) {
	evs := make([]Event, len(values))
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, v := range values {
		k, err := in.job.Key(v)
		if err != nil {
			return nil, fmt.Errorf("job %s: key of event %d: %w", in.job.Name, i, err)
		}
		if bytes.Compare(k, in.job.Start) < 0 || bytes.Compare(k, in.job.End) >= 0 {
			return nil, fmt.Errorf("job %s: key %q of event %d is outside the job's span", in.job.Name, k, i)
		}
		in.next[string(k)]++
		evs[i] = Event{Key: k, Position: in.next[string(k)], Value: v}
	}
	return evs, nil
}

// Send produces values and returns their acknowledgements in order.
func (in *Ingester) Send(ctx context.Context, values [][]byte) ([]Ack, error) {
	if in.cfg.Resume {
		if err := in.resume(ctx, values); err != nil {
			return nil, err
		}
	}
	evs, err := in.Events(values)
	if err != nil {
		return nil, err
	}
	return in.SendEvents(ctx, evs)
}

// SendEvents sends events with their positions (again, after an error: a replay is harmless) until
// each is acknowledged or ctx ends. Events that Send or Events numbered and that were not
// acknowledged must be sent again (this way) before the key's later events: positions are applied
// without gaps, so a key whose event is dropped takes no more.
func (in *Ingester) SendEvents(ctx context.Context, evs []Event) ([]Ack, error) {
	acks := make([]Ack, len(evs))
	pending := make([]int, len(evs))
	for i := range evs {
		pending[i] = i
	}
	wait := 5 * time.Millisecond
	var last error
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return acks, fmt.Errorf("stream %s: %d of %d events not acknowledged (last: %v): %w", in.job.Name, len(pending), len(evs), last, err)
		}
		groups, err := in.group(ctx, evs, pending)
		if err != nil {
			last = err
			pending = in.pause(ctx, &wait, pending)
			continue
		}
		var retry []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for addr, idx := range groups {
			wg.Add(1)
			go func(addr string, idx []int) {
				defer wg.Done()
				again, err := in.sendTo(ctx, addr, evs, idx, acks)
				mu.Lock()
				defer mu.Unlock()
				retry = append(retry, again...)
				if err != nil {
					last = err
				}
			}(addr, idx)
		}
		wg.Wait()
		sort.Ints(retry) // keep each key's events in order
		if len(retry) > 0 {
			retry = in.pause(ctx, &wait, retry)
		} else {
			wait = 5 * time.Millisecond
		}
		pending = retry
	}
	return acks, nil
}

// pause waits before a retry round, doubling up to 200ms.
func (in *Ingester) pause(ctx context.Context, wait *time.Duration, pending []int) []int {
	t := time.NewTimer(*wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	if *wait *= 2; *wait > 200*time.Millisecond {
		*wait = 200 * time.Millisecond
	}
	return pending
}

// resume learns the positions stored with the state of the keys of values not seen yet.
func (in *Ingester) resume(ctx context.Context, values [][]byte) error {
	for _, v := range values {
		k, err := in.job.Key(v)
		if err != nil {
			return fmt.Errorf("job %s: key of an event: %w", in.job.Name, err)
		}
		in.mu.Lock()
		_, seen := in.next[string(k)]
		in.mu.Unlock()
		if seen {
			continue
		}
		raw, found, err := in.cfg.Client.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("read the position of key %q: %w", k, err)
		}
		var pos uint64
		if found {
			if pos, _, _, err = DecodeValue(raw); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		in.mu.Lock()
		if _, seen := in.next[string(k)]; !seen {
			in.next[string(k)] = pos
		}
		in.mu.Unlock()
	}
	return nil
}
