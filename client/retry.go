package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stopper"
)

// sentTracker is a gRPC stats handler that records whether a call's request message was handed to the
// transport. A call that failed before that provably never reached a server, so even a write may be
// retried; after it, a transport failure leaves a write's outcome unknown.
type sentTracker struct{}

type sentKey struct{}

// withSentFlag returns a context whose calls set *flag once their request is written.
func withSentFlag(ctx context.Context) (context.Context, *atomic.Bool) {
	flag := new(atomic.Bool)
	return context.WithValue(ctx, sentKey{}, flag), flag
}

// TagRPC implements stats.Handler.
func (*sentTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler.
func (*sentTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); !ok {
		return
	}
	if flag, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok {
		flag.Store(true)
	}
}

// TagConn implements stats.Handler.
func (*sentTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (*sentTracker) HandleConn(context.Context, stats.ConnStats) {}

// opKind says how an operation may be retried.
type opKind struct {
	name     string // for messages: "get", "put", ...
	write    bool   // an AMBIGUOUS/TIMEOUT/after-send failure is returned, not retried
	follower bool   // follower read: any replica may serve it
	// consistency and maxStalenessMs: a read any replica may serve linearizably or within a bound
	// (pb.RequestHeader); READ_LEADER (zero) for everything else.
	consistency    pb.ReadConsistency
	maxStalenessMs int64
	long           bool // a long-running admin call (compaction, backup): one attempt is bounded by ctx only
}

// anyReplica reports whether any replica of the range may serve op.
func (op opKind) anyReplica() bool {
	return op.follower || op.consistency != pb.ReadConsistency_READ_LEADER
}

// target is where one attempt goes.
type target struct {
	routed bool       // entry is meaningful (the request carries its range id)
	entry  rangeEntry // the range the request is routed to
	addr   string
}

// rpcFunc performs one attempt against sc and returns the server's error (nil or OK on success) or the
// gRPC error. hdr is the request header to send (nil for unrouted calls).
type rpcFunc func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, t target) (*pb.Error, error)

// locateFunc finds the range an attempt is routed to.
type locateFunc func(ctx context.Context) (rangeEntry, error)

// backoff yields jittered waits from minBackoff doubling to maxBackoff.
type backoff struct{ next time.Duration }

func (b *backoff) wait(ctx context.Context) error {
	if b.next == 0 {
		b.next = minBackoff
	}
	d := b.next
	if b.next *= 2; b.next > maxBackoff {
		b.next = maxBackoff
	}
	d = d/2 + rand.N(d/2+1)
	return stopper.SleepContext(ctx, d)
}

// ctxError turns the caller's context ending into the error to return. last is the most recent
// attempt's error, for the message.
func ctxError(op opKind, ctxErr error, last error) error {
	msg := fmt.Sprintf("%s: %v", op.name, ctxErr)
	if last != nil {
		msg += fmt.Sprintf(" (last error: %v)", last)
	}
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return newError(pb.ErrorCode_TIMEOUT, msg, ctxErr)
	}
	return fmt.Errorf("%s: %w", msg, ctxErr)
}

// verdict is what the retry loop does after an attempt.
type verdict int

const (
	done         verdict = iota // success
	fail                        // return err
	retryNow                    // retry without waiting
	retryBackoff                // wait, then retry
)

// run performs op with retries. For a routed op, locate finds the range of each attempt and the request
// header carries its id; for an unrouted op (locate nil), attempts go to prefer (if set) and then to
// the known nodes in turn, following NOT_LEADER hints.
func (c *Client) run(ctx context.Context, op opKind, locate locateFunc, prefer string, call rpcFunc) error {
	var (
		bo        backoff
		last      error
		hint      string // leader address from the last NOT_LEADER, for the same range
		hintRange uint64
		redirects int
		moved     int
	)
	for attempt := 0; attempt < c.cfg.MaxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return ctxError(op, err, last)
		}
		if err := c.failFast(); err != nil {
			return err
		}
		t, err := c.pickTarget(ctx, op, locate, prefer, attempt, hint, hintRange)
		hint, hintRange = "", 0
		if err != nil {
			if isTerminal(err) {
				return err
			}
			last = err
			if werr := bo.wait(ctx); werr != nil {
				return ctxError(op, werr, last)
			}
			continue
		}
		v, err := c.attempt(ctx, op, t, call)
		if v == done {
			return nil
		}
		last = err
		var se *Error
		errors.As(err, &se)
		switch {
		case v == fail:
			return err
		case se != nil && se.Code == pb.ErrorCode_NOT_LEADER:
			if se.LeaderAddr != "" && se.LeaderAddr != t.addr {
				redirects++
				hint = se.LeaderAddr
				if t.routed {
					hintRange = t.entry.desc.GetRangeId()
				}
				if redirects <= 2 {
					continue // follow the hint at once
				}
			} else if t.routed {
				c.cache.evict(t.entry.desc)
			}
		case se != nil && se.Code == pb.ErrorCode_RANGE_MOVED:
			// Re-look the range up at once the first time; if the meta range lags behind the
			// replicas, give it time.
			moved++
			if moved <= 1 {
				continue
			}
		case v == retryNow:
			continue
		}
		if werr := bo.wait(ctx); werr != nil {
			return ctxError(op, werr, last)
		}
	}
	if last == nil {
		last = newError(pb.ErrorCode_UNAVAILABLE, op.name+": no attempt made", nil)
	}
	return last
}

// isTerminal reports errors from routing that retrying cannot fix.
func isTerminal(err error) bool {
	if errors.Is(err, ErrClosed) {
		return true
	}
	var se *Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case pb.ErrorCode_INVALID_ARGUMENT, pb.ErrorCode_UNAUTHENTICATED, pb.ErrorCode_INTERNAL, pb.ErrorCode_CROSS_RANGE:
		return true
	}
	return false
}

// pickTarget decides where attempt number attempt goes.
func (c *Client) pickTarget(ctx context.Context, op opKind, locate locateFunc, prefer string, attempt int, hint string, hintRange uint64) (target, error) {
	if locate == nil {
		if hint != "" {
			return target{addr: hint}, nil
		}
		if prefer != "" && attempt == 0 {
			return target{addr: prefer}, nil
		}
		addrs := c.lookupAddrs()
		return target{addr: c.firstHealthy(addrs, attempt)}, nil
	}
	e, err := locate(ctx)
	if err != nil {
		return target{}, err
	}
	t := target{routed: true, entry: e}
	if hint != "" && hintRange == e.desc.GetRangeId() {
		t.addr = hint
		return t, nil
	}
	t.addr = c.replicaAddr(e, op.anyReplica(), attempt)
	if t.addr == "" {
		// No replica's address is known (the lookup did not say); any node can redirect us.
		c.cache.evict(e.desc)
		t.addr = c.firstHealthy(c.lookupAddrs(), attempt)
	}
	return t, nil
}

// replicaAddr picks the node for a routed attempt: the leader if known and not suspect, otherwise the
// voters in turn; for a read any replica may serve, the replica (voter or learner) chooseReplica
// picks by the client's load figures among those not suspect.
func (c *Client) replicaAddr(e rangeEntry, anyReplica bool, attempt int) string {
	if !anyReplica {
		if a := c.cache.leaderAddrOf(e); a != "" && !c.isSuspect(a) {
			return a
		}
	}
	var voters, learners []string
	for _, r := range e.desc.GetReplicas() {
		a := c.cache.nodeAddr(r.GetNodeId())
		if a == "" {
			continue
		}
		if r.GetLearner() {
			learners = append(learners, a)
		} else {
			voters = append(voters, a)
		}
	}
	if anyReplica {
		if a := c.leastLoaded(append(voters, learners...)); a != "" {
			return a
		}
	}
	if len(voters) == 0 {
		voters = learners
	}
	if len(voters) == 0 {
		return c.cache.leaderAddrOf(e)
	}
	return c.firstHealthy(voters, attempt)
}

// leastLoaded picks among addrs by chooseReplica, skipping suspect addresses unless all are.
func (c *Client) leastLoaded(addrs []string) string {
	if len(addrs) == 0 {
		return ""
	}
	c.mu.Lock()
	c.followerN++
	n := int(c.followerN % uint64(len(addrs)))
	c.mu.Unlock()
	healthy := addrs[:0:0]
	for _, a := range addrs {
		if !c.isSuspect(a) {
			healthy = append(healthy, a)
		}
	}
	if len(healthy) == 0 {
		return addrs[n]
	}
	cands := c.loads.loads(healthy, time.Now())
	return cands[chooseReplica(cands, c.cfg.ReadImbalance, n)].addr
}

// firstHealthy returns the first non-suspect address of addrs starting at index n (mod len), or
// addrs[n mod len] if all are suspect.
func (c *Client) firstHealthy(addrs []string, n int) string {
	if len(addrs) == 0 {
		return ""
	}
	for i := range addrs {
		a := addrs[(n+i)%len(addrs)]
		if !c.isSuspect(a) {
			return a
		}
	}
	return addrs[n%len(addrs)]
}

// attempt sends one request and classifies the outcome, updating the range cache as a side effect.
func (c *Client) attempt(ctx context.Context, op opKind, t target, call rpcFunc) (verdict, error) {
	sc, err := c.conns.get(t.addr)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return fail, err
		}
		c.markSuspect(t.addr)
		return retryBackoff, err
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	if op.long {
		cancel()
		actx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	actx, sent := withSentFlag(actx)
	if t.routed && op.anyReplica() {
		defer c.loads.begin(t.addr)()
	}
	var hdr *pb.RequestHeader
	if t.routed {
		hdr = &pb.RequestHeader{RangeId: t.entry.desc.GetRangeId(), FollowerRead: op.follower, Consistency: op.consistency, MaxStalenessMs: op.maxStalenessMs}
	}
	perr, gerr := call(actx, sc, hdr, t)
	if gerr != nil {
		return c.classifyTransport(ctx, op, t, gerr, sent.Load())
	}
	c.clearSuspect(t.addr)
	se := fromPB(perr)
	if se == nil {
		if t.routed && !op.anyReplica() && c.cache.leaderAddrOf(t.entry) == "" {
			// Only the leader serves this op: remember where it is (the voter asked in turn after
			// the cached leader was forgotten).
			c.cache.setLeader(t.entry.desc.GetRangeId(), 0, t.addr)
		}
		return done, nil
	}
	se.Message = describe(op, t, se.Message)
	switch se.Code {
	case pb.ErrorCode_NOT_LEADER:
		if t.routed {
			if se.LeaderAddr != "" && se.LeaderAddr != t.addr {
				c.cache.setLeader(t.entry.desc.GetRangeId(), perr.GetLeaderNodeId(), se.LeaderAddr)
			}
		}
		if se.LeaderAddr != "" && se.LeaderAddr != t.addr && c.conns.wake(ctx, se.LeaderAddr, wakeWait) {
			// A replica names the node as leader and it answers: whatever failed there before is over.
			c.clearSuspectOnly(se.LeaderAddr)
		}
		return retryBackoff, se // run() decides whether to follow the hint at once
	case pb.ErrorCode_RANGE_MOVED:
		if t.routed {
			c.cache.evict(t.entry.desc)
			if d := perr.GetRange(); d != nil && d.GetRangeId() != 0 {
				c.cache.insert(d, 0, nil)
			}
			return retryNow, se
		}
		return retryBackoff, se
	case pb.ErrorCode_UNAVAILABLE:
		if t.routed && t.addr == c.cache.leaderAddrOf(t.entry) {
			// The node the cache names as leader cannot serve: a node restarting answers "node is
			// starting" for as long as it opens its store, which retrying it would wait out. The next
			// attempt asks the voters in turn, and one that knows the leader names it.
			c.cache.setLeader(t.entry.desc.GetRangeId(), 0, "")
		}
		return retryBackoff, se
	case pb.ErrorCode_OVERLOADED, pb.ErrorCode_FENCED:
		return retryBackoff, se
	case pb.ErrorCode_AMBIGUOUS, pb.ErrorCode_TIMEOUT:
		if op.write {
			return fail, se
		}
		return retryBackoff, se
	default: // INVALID_ARGUMENT, UNAUTHENTICATED, INTERNAL and codes this client does not know
		return fail, se
	}
}

// describe prefixes a server message with the operation, range and node it concerns.
func describe(op opKind, t target, msg string) string {
	where := "node " + t.addr
	if t.routed {
		where = fmt.Sprintf("range r%d at node %s", t.entry.desc.GetRangeId(), t.addr)
	}
	if msg == "" {
		return fmt.Sprintf("%s (%s)", op.name, where)
	}
	return fmt.Sprintf("%s (%s): %s", op.name, where, msg)
}

// otherVoterToTry reports whether e names a voter at an address other than addr that is not suspect.
func (c *Client) otherVoterToTry(e rangeEntry, addr string) bool {
	for _, r := range e.desc.GetReplicas() {
		if r.GetLearner() {
			continue
		}
		if a := c.cache.nodeAddr(r.GetNodeId()); a != "" && a != addr && !c.isSuspect(a) {
			return true
		}
	}
	return false
}

// classifyTransport classifies a gRPC-level failure. sent says whether the request reached the
// transport; if it did not, the server never saw it and any op may be retried.
func (c *Client) classifyTransport(ctx context.Context, op opKind, t target, gerr error, sent bool) (verdict, error) {
	st, _ := status.FromError(gerr)
	code := st.Code()
	where := fmt.Sprintf("%s to %s", op.name, t.addr)
	if t.routed {
		where = fmt.Sprintf("%s to range r%d at %s", op.name, t.entry.desc.GetRangeId(), t.addr)
	}
	if errors.Is(gerr, ErrClosed) {
		return fail, gerr
	}
	// The caller's own context ended.
	if cerr := ctx.Err(); cerr != nil {
		if sent && op.write {
			code := pb.ErrorCode_AMBIGUOUS
			if errors.Is(cerr, context.DeadlineExceeded) {
				code = pb.ErrorCode_TIMEOUT
			}
			return fail, newError(code, fmt.Sprintf("%s: %v after the request was sent; the write may or may not have been applied", where, cerr), cerr)
		}
		return fail, ctxError(op, cerr, gerr)
	}
	switch code {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fail, newError(pb.ErrorCode_UNAUTHENTICATED, fmt.Sprintf("%s: %s", where, st.Message()), gerr)
	case codes.InvalidArgument:
		return fail, newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("%s: %s", where, st.Message()), gerr)
	case codes.Unimplemented:
		return fail, newError(pb.ErrorCode_INTERNAL, fmt.Sprintf("%s: server does not implement this call: %s", where, st.Message()), gerr)
	}
	if code == codes.ResourceExhausted && (!sent || !op.write) {
		// A message over a gRPC size limit fails the same way every time: do not retry it.
		return fail, newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("%s: %s", where, st.Message()), gerr)
	}
	if t.routed && (code == codes.Unavailable || !sent) && !c.otherVoterToTry(t.entry, t.addr) {
		// The cached descriptor names no other voter to try; it may predate replicas added since
		// (a range first cached with one replica): look it up again. While it names one, the next
		// attempt goes there without a lookup: a killed node often leads the meta range too, and a
		// lookup would wait out that range's election as well as the user range's.
		c.cache.evict(t.entry.desc)
	}
	if !sent {
		// Never written to a connection: the server cannot have seen it.
		c.markSuspect(t.addr)
		if why := unreachableWhy(st.Message()); why != "" {
			c.markUnreachable(t.addr, why)
			return retryBackoff, newError(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("%s: %s", where, why), gerr)
		}
		return retryBackoff, newError(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("%s: %s", where, st.Message()), gerr)
	}
	if code == codes.Unavailable || code == codes.DeadlineExceeded {
		c.markSuspect(t.addr)
	}
	if op.write {
		if code == codes.DeadlineExceeded {
			return fail, newError(pb.ErrorCode_TIMEOUT, fmt.Sprintf("%s: no answer within %v; the write may or may not have been applied", where, c.cfg.RequestTimeout), gerr)
		}
		return fail, newError(pb.ErrorCode_AMBIGUOUS, fmt.Sprintf("%s: %s after the request was sent; the write may or may not have been applied", where, st.Message()), gerr)
	}
	if code == codes.DeadlineExceeded {
		return retryBackoff, newError(pb.ErrorCode_TIMEOUT, fmt.Sprintf("%s: no answer within %v", where, c.cfg.RequestTimeout), gerr)
	}
	return retryBackoff, newError(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("%s: %s", where, st.Message()), gerr)
}

// unreachableWhy says, from a gRPC transport error's message, why nothing at the address can serve
// the client: nothing listens there, or what listens does not speak gRPC. It returns "" for any other
// failure (a timeout, a reset connection, TLS), which may pass.
func unreachableWhy(msg string) string {
	switch {
	case strings.Contains(msg, syscall.ECONNREFUSED.Error()):
		return "connection refused: is a node running there?"
	case strings.Contains(msg, "looked like an HTTP/1.1 header"):
		return "this address answers HTTP/1.1, not gRPC: it looks like a node's --http port; give the node's gRPC address (its --listen, default port 26257)"
	}
	return ""
}

// lookupAddrs lists the addresses to send unrouted requests to: the last one that answered, the
// configured ones, then every node learned from lookups.
func (c *Client) lookupAddrs() []string {
	c.mu.Lock()
	last := c.lastGood
	c.mu.Unlock()
	seen := make(map[string]bool)
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(last)
	for _, a := range c.cfg.Addrs {
		add(a)
	}
	for _, a := range c.cache.nodeAddrs() {
		add(a)
	}
	return out
}

// locate returns the range containing key, from the cache or by a lookup.
func (c *Client) locate(ctx context.Context, key []byte) (rangeEntry, error) {
	if e, ok := c.cache.get(key); ok {
		return e, nil
	}
	_, e, err := c.lookupOnce(ctx, key)
	return e, err
}

// lookupOnce sends RangeLookup for key to the known nodes in turn until one answers, and caches the
// answer. It fails if none does (the caller's retry loop backs off and calls again).
func (c *Client) lookupOnce(ctx context.Context, key []byte) (*pb.RangeLookupResponse, rangeEntry, error) {
	var last error
	addrs := c.lookupAddrs()
	// Try healthy addresses first.
	healthy := addrs[:0:0]
	var sick []string
	for _, a := range addrs {
		if c.isSuspect(a) {
			sick = append(sick, a)
		} else {
			healthy = append(healthy, a)
		}
	}
	op := opKind{name: "range lookup"}
	for _, addr := range append(healthy, sick...) {
		var resp *pb.RangeLookupResponse
		v, err := c.attempt(ctx, op, target{addr: addr}, func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.RangeLookup(ctx, &pb.RangeLookupRequest{Key: key})
			resp = r
			return r.GetError(), err
		})
		if v == done {
			d := resp.GetRange()
			if d == nil || !contains(d, key) {
				last = newError(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range lookup for key %q at %s returned range %s, which does not contain it", key, addr, spanString(d)), nil)
				continue
			}
			c.mu.Lock()
			c.lastGood = addr
			c.mu.Unlock()
			e := c.cache.insert(d, resp.GetLeaderNodeId(), resp.GetNodes())
			if a := c.cache.leaderAddrOf(e); a != "" {
				// The meta range may name a leader it has not seen go: redial, but keep avoiding it
				// until a replica's NOT_LEADER confirms it.
				c.conns.wake(ctx, a, 0)
			}
			return resp, e, nil
		}
		if v == fail {
			return nil, rangeEntry{}, err
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = newError(pb.ErrorCode_UNAVAILABLE, "range lookup: no node address known", nil)
	}
	return nil, rangeEntry{}, last
}

// spanString renders a descriptor's span for messages.
func spanString(d *pb.RangeDescriptor) string {
	if d == nil {
		return "<none>"
	}
	end := fmt.Sprintf("%q", d.GetEndKey())
	if len(d.GetEndKey()) == 0 {
		end = "+inf"
	}
	return fmt.Sprintf("r%d [%q, %s)", d.GetRangeId(), d.GetStartKey(), end)
}

// locateBefore returns the range holding the keys just below end (empty end: +inf), never looking
// below lower. It is how reverse scans move from range to range: if end itself starts a range, the
// range wanted is the one ending there, found by walking forward from lower.
func (c *Client) locateBefore(ctx context.Context, lower, end []byte) (rangeEntry, error) {
	if e, ok := c.cache.getBefore(end); ok {
		return e, nil
	}
	if len(end) > 0 {
		e, err := c.locate(ctx, end)
		if err != nil {
			return rangeEntry{}, err
		}
		if bytes.Compare(e.desc.GetStartKey(), end) < 0 {
			return e, nil
		}
	}
	k := lower
	for {
		e, err := c.locate(ctx, k)
		if err != nil {
			return rangeEntry{}, err
		}
		ek := e.desc.GetEndKey()
		if len(ek) == 0 || (len(end) > 0 && bytes.Compare(ek, end) >= 0) {
			return e, nil
		}
		if bytes.Compare(ek, k) <= 0 {
			return rangeEntry{}, newError(pb.ErrorCode_INTERNAL, fmt.Sprintf("range lookup for key %q returned %s, which ends at or before it", k, spanString(e.desc)), nil)
		}
		if err := ctx.Err(); err != nil {
			return rangeEntry{}, err
		}
		k = ek
	}
}
