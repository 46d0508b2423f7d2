package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// WatchEvent is one change of a watched span, or a checkpoint.
type WatchEvent struct {
	// Kind is PUT, DELETE, EXPIRE or CHECKPOINT.
	Kind  pb.RangeFeedEvent_Kind
	Key   []byte
	Value []byte
	// ExpireAtUnixMs is a PUT's expiry (0: none); Version counts the key's writes since it was created.
	ExpireAtUnixMs int64
	Version        uint64
	// RangeID, Index and Seq are the change's position: the raft index of its range, and its place
	// among that index's changes. A reader that sees a position at or below one it has seen for that
	// range has seen the change.
	RangeID, Index uint64
	Seq            uint32
	// Cursor, on a CHECKPOINT, resumes the watch after everything delivered so far (Watch's from).
	Cursor string
	// Frontier, on a CHECKPOINT: for each range read, the raft index through which its changes in
	// the span were all delivered.
	Frontier map[uint64]uint64
	// Scanning, on a CHECKPOINT of a watch WithInitialScan: how many ranges have not delivered their
	// whole initial scan yet (0: every live key of the span was delivered).
	Scanning int
	// Initial: a PUT of the initial scan (WithInitialScan): the key's value when the watch started.
	Initial bool
}

// WatchOption tunes a watch.
type WatchOption func(*watch)

// WithCheckpointEvery hands fn a CHECKPOINT every d (default: at most every second, and only after
// a change), also while the span is idle, so that a reader waiting for a state of the watch (its
// scan done, a position passed) is called again.
func WithCheckpointEvery(d time.Duration) WatchOption {
	return func(w *watch) { w.checkpointEvery = d }
}

// WithInitialScan makes a watch from now first deliver every live key of the span as it is when the
// watch starts (PUT events with Initial set, each range's at one consistent index), then the changes
// after it, so that the caller needs no separate scan. A watch resumed from a cursor ignores it.
func WithInitialScan() WatchOption { return func(w *watch) { w.initial = true } }

// ErrWatchLost: a watch cannot continue without a gap: no replica holds the changes after its
// position any more (they keep a bounded, in-memory window). Re-read the span and watch from now.
var ErrWatchLost = errors.New("watch lost its position: no replica holds the changes after it; re-read the span and watch from now")

// ErrScanInterrupted: a watch's initial scan broke off (its node failed or left) after it had
// delivered part of the span. Another scan would be of another moment, with no DELETE for what was
// removed in between, so the watch stops: start it again (with its initial scan).
var ErrScanInterrupted = errors.New("watch: the initial scan was interrupted; start the watch again")

// watchCheckpointEvery bounds how often a watch hands its caller a cursor.
const watchCheckpointEvery = time.Second

// Watch delivers every change applied to [start, end) (empty end: no bound) to fn, in order per key,
// at least once, until ctx ends, fn fails or the watch is lost (ErrWatchLost). from is a cursor a
// CHECKPOINT event carried ("": from now). The first call to fn is a CHECKPOINT once the watch is
// established: a write acknowledged after it is delivered; when ctx ends, a last CHECKPOINT carries
// the cursor past everything delivered. fn runs on one goroutine.
//
// It follows the span's ranges through splits, merges, replica moves and leader changes, reading
// each range's change stream (RangeFeed) from any replica, the leader first.
func (c *Client) Watch(ctx context.Context, start, end []byte, from string, fn func(WatchEvent) error, opts ...WatchOption) error {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("watch: empty span [%q, %q)", start, end), nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &watch{c: c, ctx: ctx, start: start, end: end, fn: fn, feeds: map[uint64]*feed{}, msgs: make(chan feedMsg, 64)}
	defer w.stopAll()
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	for _, o := range opts {
		o(w)
	}
	if from != "" {
		w.initial = false
		cur, err := decodeCursor(from)
		if err != nil {
			return err
		}
		for _, f := range cur {
			w.open(f.RangeID, f.Start, f.End, f.Pos, f.Complete, f.AfterMerge)
		}
		return w.run(true)
	}
	if err := w.openSpanFromNow(); err != nil {
		return err
	}
	return w.run(false)
}

// feed is the watch's view of one range's change stream.
type feed struct {
	id         uint64
	start, end []byte // the watched part of the range
	// pos is the last index delivered; complete: all of its changes were (else a reconnect starts at
	// pos again, and the changes of pos below nextSeq were delivered already).
	pos      uint64
	complete bool
	nextSeq  uint32
	opened   bool
	cancel   context.CancelFunc
	gen      int // which worker's messages count (a restarted feed ignores its old worker)
	// waitFor: this feed starts once range waitFor delivered its changes through waitIndex (a merge).
	waitFor, waitIndex uint64
	afterMerge         uint64
}

type feedMsg struct {
	id  uint64
	gen int
	evs []*pb.RangeFeedEvent // in order; a SPLIT, MERGE or REMOVED only last
	err error                // the worker gave up
}

type watch struct {
	c          *Client
	ctx        context.Context
	start, end []byte
	fn         func(WatchEvent) error
	feeds      map[uint64]*feed
	msgs       chan feedMsg
	gens       int
	lastCursor time.Time
	initial    bool // from-now feeds start with an initial scan
	// checkpointEvery spaces the CHECKPOINTs fn gets (watchCheckpointEvery if 0); moved: a message
	// arrived since the last one.
	checkpointEvery time.Duration
	moved           bool
	timer           *time.Timer // step's, reused
}

// clip returns the part of [s, e) that is watched, ok false if none.
func (w *watch) clip(s, e []byte) ([]byte, []byte, bool) {
	if bytes.Compare(s, w.start) < 0 {
		s = w.start
	}
	if len(w.end) > 0 && (len(e) == 0 || bytes.Compare(w.end, e) < 0) {
		e = w.end
	}
	return s, e, len(e) == 0 || bytes.Compare(s, e) < 0
}

// open starts (or restarts) the feed of range id over [s, e) from pos; afterMerge, if set, starts it
// after the merge that absorbed that range instead.
func (w *watch) open(id uint64, s, e []byte, pos uint64, complete bool, afterMerge uint64) *feed {
	if old := w.feeds[id]; old != nil && old.cancel != nil {
		old.cancel()
	}
	w.gens++
	f := &feed{id: id, start: s, end: e, pos: pos, complete: complete, gen: w.gens, afterMerge: afterMerge}
	w.feeds[id] = f
	w.startWorker(f)
	return f
}

func (w *watch) startWorker(f *feed) {
	ctx, cancel := context.WithCancel(w.ctx)
	f.cancel = cancel
	from := f.pos
	if !f.complete && from > 0 {
		from-- // the last index again: its changes not yet delivered come with it
	}
	req := &pb.RangeFeedRequest{RangeId: f.id, StartKey: f.start, EndKey: f.end, FromIndex: from, AfterMergeOf: f.afterMerge,
		InitialScan: w.initial && from == 0 && f.afterMerge == 0}
	go w.c.feedWorker(ctx, req, f.gen, w.msgs)
}

func (w *watch) stopAll() {
	for _, f := range w.feeds {
		if f.cancel != nil {
			f.cancel()
		}
	}
}

// openSpanFromNow opens a feed from now on every range of the span, and again on any range a split
// made before its neighbour's feed started (so none is missed), until the span's ranges are stable.
func (w *watch) openSpanFromNow() error {
	for round := 0; ; round++ {
		descs, err := w.c.spanRanges(w.ctx, w.start, w.end)
		if err != nil {
			return err
		}
		added := false
		for _, d := range descs {
			if w.feeds[d.RangeId] != nil {
				continue
			}
			s, e, ok := w.clip(d.StartKey, d.EndKey)
			if ok {
				w.open(d.RangeId, s, e, 0, true, 0)
				added = true
			}
		}
		if !added && round > 0 {
			return nil
		}
		if err := w.waitOpened(); err != nil {
			return err
		}
	}
}

// waitOpened handles messages until every feed has started.
func (w *watch) waitOpened() error {
	for {
		all := true
		for _, f := range w.feeds {
			all = all && (f.opened || f.waitFor != 0)
		}
		if all {
			return nil
		}
		if err := w.step(); err != nil {
			return err
		}
	}
}

func (w *watch) run(resumed bool) error {
	if resumed {
		if err := w.waitOpened(); err != nil {
			return err
		}
	}
	if err := w.checkpoint(true); err != nil {
		return err
	}
	for {
		if err := w.step(); err != nil {
			if w.ctx.Err() != nil {
				// Stopped: a last cursor, past everything delivered.
				_ = w.checkpoint(true)
			}
			return err
		}
		if err := w.checkpoint(false); err != nil {
			return err
		}
	}
}

// checkpoint hands fn a cursor, at most every watchCheckpointEvery unless now.
func (w *watch) checkpoint(now bool) error {
	every := w.checkpointEvery
	if every <= 0 {
		every = watchCheckpointEvery
	}
	if !now && time.Since(w.lastCursor) < every {
		return nil
	}
	w.lastCursor, w.moved = time.Now(), false
	frontier := make(map[uint64]uint64, len(w.feeds))
	scanning := 0
	for _, f := range w.feeds {
		if w.initial && !f.opened {
			scanning++
		}
		pos := f.pos
		if !f.complete || f.waitFor != 0 {
			pos-- // its last index may have more changes to come (or the merge is not through)
		}
		frontier[f.id] = pos
	}
	return w.fn(WatchEvent{Kind: pb.RangeFeedEvent_CHECKPOINT, Cursor: w.cursor(), Frontier: frontier, Scanning: scanning})
}

// step handles one message from a feed's worker.
func (w *watch) step() error {
	var m feedMsg
	select {
	case m = <-w.msgs: // the common case under load: no timer needed
	default:
		var due <-chan time.Time // a checkpoint owed once its interval has passed, with no message to wake for
		if w.moved || w.checkpointEvery > 0 {
			every := w.checkpointEvery
			if every <= 0 {
				every = watchCheckpointEvery
			}
			if w.timer == nil {
				w.timer = time.NewTimer(every - time.Since(w.lastCursor))
			} else {
				w.timer.Reset(every - time.Since(w.lastCursor)) // a value it may hold is dropped (Go ≥ 1.23)
			}
			due = w.timer.C
		}
		select {
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-due:
			return nil
		case m = <-w.msgs:
		}
	}
	w.moved = true
	f := w.feeds[m.id]
	if f == nil || f.gen != m.gen {
		return nil // a worker already replaced
	}
	if m.err != nil {
		return m.err
	}
	for _, ev := range m.evs {
		if err := w.handle(f, ev); err != nil {
			return err
		}
	}
	return nil
}

// handle applies one event of feed f.
func (w *watch) handle(f *feed, ev *pb.RangeFeedEvent) error {
	if ev.Initial {
		return w.fn(WatchEvent{Kind: ev.Kind, Key: ev.Key, Value: ev.Value, ExpireAtUnixMs: ev.ExpireAtUnixMs, Version: ev.Version,
			RangeID: ev.RangeId, Index: ev.Index, Initial: true})
	}
	if !f.opened {
		f.opened = true
		if f.pos == 0 || f.afterMerge != 0 {
			f.pos, f.complete, f.afterMerge = ev.Index, true, 0
		}
	}
	switch ev.Kind {
	case pb.RangeFeedEvent_CHECKPOINT:
		if ev.Index >= f.pos {
			f.pos, f.complete, f.nextSeq = ev.Index, true, 0
		}
		return w.mergeProgress(f)
	case pb.RangeFeedEvent_SPLIT:
		return w.split(f, ev)
	case pb.RangeFeedEvent_MERGE:
		return w.merged(f, ev)
	case pb.RangeFeedEvent_REMOVED:
		return w.mergedAway(f, ev)
	}
	switch {
	case ev.Index < f.pos || ev.Index == f.pos && (f.complete || ev.Seq < f.nextSeq):
		return nil // delivered before a reconnect
	case ev.Index > f.pos:
		f.pos, f.complete = ev.Index, false
	}
	f.nextSeq = ev.Seq + 1
	if err := w.fn(WatchEvent{Kind: ev.Kind, Key: ev.Key, Value: ev.Value, ExpireAtUnixMs: ev.ExpireAtUnixMs, Version: ev.Version,
		RangeID: ev.RangeId, Index: ev.Index, Seq: ev.Seq}); err != nil {
		return err
	}
	return w.mergeProgress(f)
}

// split continues on both sides: the left keeps the range's id, the right starts at its beginning.
// Everything before the split was delivered first, so each key's changes stay in order.
func (w *watch) split(f *feed, ev *pb.RangeFeedEvent) error {
	if ev.Index <= f.pos && f.complete {
		return nil
	}
	f.cancel()
	left, right := ev.Desc, ev.Right
	if s, e, ok := w.clip(right.StartKey, right.EndKey); ok {
		w.open(right.RangeId, s, e, 1, true, 0)
	}
	if s, e, ok := w.clip(left.StartKey, left.EndKey); ok {
		w.open(f.id, s, e, ev.Index, true, 0)
	} else {
		delete(w.feeds, f.id)
	}
	return nil
}

// merged continues on the widened range once the absorbed range's feed, if the watch reads it, has
// delivered everything up to its freeze.
func (w *watch) merged(f *feed, ev *pb.RangeFeedEvent) error {
	if ev.Index <= f.pos && f.complete {
		return nil
	}
	f.cancel()
	s, e, ok := w.clip(ev.Desc.StartKey, ev.Desc.EndKey)
	if !ok {
		delete(w.feeds, f.id)
		return nil
	}
	right := ev.Right
	nf := &feed{id: f.id, start: s, end: e, pos: ev.Index, complete: true}
	w.gens++
	nf.gen = w.gens
	w.feeds[f.id] = nf
	if r := w.feeds[right.RangeId]; r != nil && r.pos < right.FreezeIndex {
		nf.waitFor, nf.waitIndex = right.RangeId, right.FreezeIndex
		return nil
	}
	if r := w.feeds[right.RangeId]; r != nil && r.cancel != nil {
		r.cancel()
	}
	delete(w.feeds, right.RangeId)
	w.startWorker(nf)
	return nil
}

// mergedAway handles a replica's REMOVED: a range merged away is done (its left neighbour carries
// its keys on); a replica that moved is the worker's to replace, so it never gets here.
func (w *watch) mergedAway(f *feed, ev *pb.RangeFeedEvent) error {
	into := ev.Desc.GetMergingInto()
	f.cancel()
	f.pos = max(f.pos, ev.Desc.GetFreezeIndex())
	if l := w.feeds[into]; l != nil {
		return w.mergeProgress(f) // the left feed meets the merge itself
	}
	// The watch does not read the left range: read it for this range's keys from the merge on.
	delete(w.feeds, f.id)
	w.open(into, f.start, f.end, 0, true, f.id)
	return nil
}

// mergeProgress starts a feed that waited for f to reach a merge's freeze.
func (w *watch) mergeProgress(f *feed) error {
	for _, l := range w.feeds {
		if l.waitFor == f.id && f.pos >= l.waitIndex {
			l.waitFor = 0
			f.cancel()
			delete(w.feeds, f.id)
			w.startWorker(l)
			return nil
		}
	}
	return nil
}

// cursorFeed is one feed in a cursor.
type cursorFeed struct {
	RangeID  uint64 `json:"r"`
	Start    []byte `json:"s,omitempty"`
	End      []byte `json:"e,omitempty"`
	Pos      uint64 `json:"p"`
	Complete bool   `json:"c,omitempty"`
	// AfterMerge: the feed starts after the merge that absorbed this range (not opened yet).
	AfterMerge uint64 `json:"m,omitempty"`
}

// cursor encodes the feeds' positions. A feed waiting for a merge resumes from before the merge.
func (w *watch) cursor() string {
	var cur []cursorFeed
	for _, f := range w.feeds {
		pos, complete := f.pos, f.complete
		if f.waitFor != 0 {
			pos, complete = pos-1, true
		}
		cur = append(cur, cursorFeed{RangeID: f.id, Start: f.start, End: f.end, Pos: pos, Complete: complete, AfterMerge: f.afterMerge})
	}
	b, _ := json.Marshal(cur) // plain structs: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) ([]cursorFeed, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var cur []cursorFeed
	if err == nil {
		err = json.Unmarshal(b, &cur)
	}
	if err != nil || len(cur) == 0 {
		return nil, newError(pb.ErrorCode_INVALID_ARGUMENT, "watch: the cursor is not one a watch's checkpoint gave", err)
	}
	return cur, nil
}

// spanRanges lists the descriptors of the ranges over [start, end).
func (c *Client) spanRanges(ctx context.Context, start, end []byte) ([]*pb.RangeDescriptor, error) {
	var out []*pb.RangeDescriptor
	key := start
	for {
		resp, _, err := c.lookupOnce(ctx, key)
		if err != nil {
			return nil, err
		}
		d := resp.GetRange()
		out = append(out, d)
		if len(d.EndKey) == 0 || len(end) > 0 && bytes.Compare(d.EndKey, end) >= 0 {
			return out, nil
		}
		key = d.EndKey
	}
}

// feedWorker reads one range's change stream into msgs, moving to another replica when the one it
// reads fails or leaves, until ctx ends. It gives up (ErrWatchLost) only when, twice in a row,
// every replica it could reach answered that it holds no such position or range.
func (c *Client) feedWorker(ctx context.Context, req *pb.RangeFeedRequest, gen int, msgs chan<- feedMsg) {
	req = proto.Clone(req).(*pb.RangeFeedRequest)
	send := func(m feedMsg) bool {
		select {
		case msgs <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	backoff := 50 * time.Millisecond
	lostPasses := 0
	var lastErr error
	for ctx.Err() == nil {
		addrs := c.feedAddrs(ctx, req.StartKey)
		lost := len(addrs) > 0
		for _, addr := range addrs {
			progressed, err := c.readFeed(ctx, addr, req, func(evs []*pb.RangeFeedEvent) bool {
				return send(feedMsg{id: req.RangeId, gen: gen, evs: evs})
			})
			if err == nil || ctx.Err() != nil {
				return // the stream ended (a split, a merge) or the watch stopped
			}
			if errors.Is(err, ErrScanInterrupted) {
				send(feedMsg{id: req.RangeId, gen: gen, err: fmt.Errorf("range %d: %w", req.RangeId, err)})
				return
			}
			lastErr = err
			if progressed {
				lostPasses, backoff, lost = 0, 50*time.Millisecond, false
			}
			if code := status.Code(err); code != codes.NotFound && code != codes.FailedPrecondition {
				lost = false
			}
		}
		if lost {
			if lostPasses++; lostPasses >= 2 {
				send(feedMsg{id: req.RangeId, gen: gen, err: fmt.Errorf("range %d after index %d: %w (last answer: %v)", req.RangeId, req.FromIndex, ErrWatchLost, lastErr)})
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// readFeed reads one stream from addr, advancing req's position as whole indexes arrive; it returns
// nil when the server ended the stream (a SPLIT or MERGE, or a merged-away range's REMOVED), and
// whether anything arrived.
func (c *Client) readFeed(ctx context.Context, addr string, req *pb.RangeFeedRequest, deliver func([]*pb.RangeFeedEvent) bool) (bool, error) {
	sc, err := c.conns.get(addr)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := sc.RangeFeed(sctx, req)
	if err != nil {
		return false, err
	}
	progressed, scanned := false, false
	for {
		batch, err := stream.Recv()
		if err == io.EOF {
			err = errors.New("stream ended without a reason")
		}
		if err != nil {
			if req.InitialScan && scanned {
				return progressed, fmt.Errorf("%w (%v)", ErrScanInterrupted, err)
			}
			return progressed, err
		}
		scanned = scanned || len(batch.Events) > 0 && batch.Events[0].Initial
		// The batch goes to the watch as one message: a handoff per event costs more than the event.
		out := batch.Events[:0:0]
		for _, ev := range batch.Events {
			keep, ended, err := readEvent(req, ev, &progressed)
			if keep {
				out = append(out, ev)
			}
			if ended || err != nil {
				if len(out) > 0 && !deliver(out) {
					return progressed, ctx.Err()
				}
				return progressed, err
			}
		}
		if len(out) > 0 && !deliver(out) {
			return progressed, ctx.Err()
		}
	}
}

// readEvent takes one event of a stream and advances req's position: keep says whether the watch
// gets it, ended whether the stream ended (with err nil: a SPLIT, a MERGE, a merged-away range's
// REMOVED; with an error: this replica moved away).
func readEvent(req *pb.RangeFeedRequest, ev *pb.RangeFeedEvent, progressed *bool) (keep, ended bool, err error) {
	if ev.Initial {
		return true, false, nil // the position stays: a stream broken during its scan scans again
	}
	// Progress is a position reached: an initial scan that fails before its end reached none.
	*progressed = true
	req.InitialScan = false
	if ev.Kind == pb.RangeFeedEvent_REMOVED && ev.Desc.GetMergingInto() == 0 {
		// This replica moved away: read another one from where it stopped.
		return false, true, status.Error(codes.NotFound, "replica removed")
	}
	switch ev.Kind {
	case pb.RangeFeedEvent_SPLIT, pb.RangeFeedEvent_MERGE, pb.RangeFeedEvent_REMOVED:
		return true, true, nil
	}
	if req.AfterMergeOf != 0 {
		req.AfterMergeOf, req.FromIndex = 0, ev.Index
	}
	// An index is whole once a later one (or a checkpoint) arrives: resume just before the last.
	if ev.Kind == pb.RangeFeedEvent_CHECKPOINT {
		req.FromIndex = max(req.FromIndex, ev.Index)
	} else if ev.Index > 0 {
		req.FromIndex = max(req.FromIndex, ev.Index-1)
	}
	return true, false, nil
}

// feedAddrs lists the addresses to read range feeds of the range holding key from: its leader's
// first, then its other replicas', then every other known node.
func (c *Client) feedAddrs(ctx context.Context, key []byte) []string {
	var addrs []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	if _, e, err := c.lookupOnce(ctx, key); err == nil {
		add(c.cache.leaderAddrOf(e))
		for _, r := range e.desc.GetReplicas() {
			add(c.cache.nodeAddr(r.NodeId))
		}
	}
	for _, a := range c.cache.nodeAddrs() {
		add(a)
	}
	return addrs
}
