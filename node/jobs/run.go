package jobs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
)

// pageAttempts bounds the tries of one page through range moves and elections.
const pageAttempts = 20

// run carries out one run of st's job (st.Running) and records its outcome.
func (s *Service) run(ctx context.Context, st *pb.JobState, rp *runPlan) {
	ctx = kv.JobRead(ctx) // its meta reads too (the ranges, the job's record): see page
	job, r := st.Job, st.Running
	var sink rowSink = &counter{}
	var export *exporter
	if job.OutputDir != "" {
		export = &exporter{dir: job.OutputDir, name: fmt.Sprintf("%s-%s.jsonl", job.Name, time.UnixMilli(r.DueUnixMs).UTC().Format("20060102T150405.000Z"))}
		sink = export
	}
	err := sink.open()
	if err == nil {
		err = s.read(ctx, st, sink, rp)
	}
	if export != nil {
		if cerr := export.close(err == nil); err == nil {
			err = cerr
		}
		r.Output = export.path()
	}
	now := s.deps.Now()
	r.FinishedUnixMs, r.ProgressUnixMs = now.UnixMilli(), now.UnixMilli()
	if err != nil {
		r.Error = err.Error()
		s.failed.Add(1)
	} else {
		var late time.Duration
		r.OnTime, late = Lateness(time.UnixMilli(r.DueUnixMs), time.Duration(job.DeadlineMs)*time.Millisecond, now)
		r.LateMs = late.Milliseconds()
		if r.OnTime {
			s.onTime.Add(1)
		} else {
			s.late.Add(1)
		}
	}
	st.Running = nil
	s.finish(st, r)
	// The node may be stopping: the outcome still gets its own short deadline.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if ok, cerr := s.current(rctx, job); cerr != nil || !ok {
		return // removed (or unreadable): nothing to record
	}
	if serr := s.saveState(rctx, st); serr != nil {
		s.log.Warn("jobs: could not record a run's outcome", "job", job.Name, "err", serr)
	}
	s.log.Info("scan job run finished", "job", job.Name, "rows", r.Rows, "bytes", r.Bytes, "on_time", r.OnTime, "late_ms", r.LateMs, "err", r.Error)
}

// current reports whether job is still the stored job of its name (not removed, not replaced).
func (s *Service) current(ctx context.Context, job *pb.ScanJob) (bool, error) {
	key := records.JobKey(job.Name)
	kvs, err := s.deps.Ranges.ScanMeta(ctx, key, append(key[:len(key):len(key)], 0), 1)
	if err != nil || len(kvs) == 0 {
		return false, err
	}
	stored := &pb.ScanJob{}
	if err := proto.Unmarshal(kvs[0].Value, stored); err != nil {
		return false, err
	}
	return stored.CreatedUnixMs == job.CreatedUnixMs, nil
}

// read reads the job's span range by range, hands every row to sink, and records progress. With a
// plan (rp), the pieces it serves from copies are read from them, the rest from disk at the plan's
// rate, and a piece the plan keeps is copied as it is read.
func (s *Service) read(ctx context.Context, st *pb.JobState, sink rowSink, rp *runPlan) (err error) {
	job, r := st.Job, st.Running
	start, end := job.Start, job.End
	if job.Table != "" {
		var err error
		// Resolved at every run: a re-key moves a table's rows to a new id.
		if start, end, err = s.tableSpan(ctx, job.Table); err != nil {
			return err
		}
	}
	if all, err := s.deps.Ranges.AllRanges(ctx); err == nil {
		r.RangesTotal = int64(overlapping(all, start, end)) // progress only: splits may change it
	}
	rate := s.diskRate(job, rp, time.UnixMilli(r.DueUnixMs))
	pace := newPacer(rate, s.cfg.PageRows)
	lastProgress := s.deps.Now()
	cursor := bytes.Clone(start)
	t := &runPieces{runID: fmt.Sprintf("%s@%d", job.Name, r.DueUnixMs), rate: rate,
		keeping: map[string]bool{}, fromStart: map[string]int64{}, read: map[string]int64{}}
	defer s.copies.reading(t.runID, 0, 0, 0)
	defer func() { s.endPieces(t, err) }()
	for {
		if _, leads := s.whoami(); !leads {
			return fmt.Errorf("this node no longer leads the meta range: the next leader runs the job")
		}
		pr := rp.at(cursor)
		if pr != nil && pr.copyKey != "" {
			copied := r.CacheBytes
			next, err := s.fromCopy(ctx, pr, cursor, sink, r)
			if err != nil {
				return err
			}
			t.read[pr.id] += r.CacheBytes - copied
			if next == nil || (len(end) > 0 && bytes.Compare(next, end) >= 0) {
				return nil // the copy reached the span's end
			}
			if !bytes.Equal(next, cursor) {
				cursor = next
				continue
			}
		}
		began := time.Now()
		resp, desc, read, err := s.diskPage(ctx, cursor, end, pace.rows(), sink, r)
		if err != nil {
			return err
		}
		if pr != nil {
			s.notePage(t, pr, cursor, resp, desc, read)
		}
		if err := pace.wait(ctx, began, read, len(resp.Kvs)); err != nil {
			return fmt.Errorf("scan job %q: %w", job.Name, err)
		}
		switch {
		case resp.Truncated && len(resp.Kvs) > 0:
			cursor = append(bytes.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
		case resp.Truncated:
			return fmt.Errorf("range %d truncated a page without returning a row", desc.RangeId)
		default:
			r.RangesDone++
			if len(desc.EndKey) == 0 || (len(end) > 0 && bytes.Compare(desc.EndKey, end) >= 0) {
				return nil
			}
			cursor = bytes.Clone(desc.EndKey)
		}
		if err := s.progress(ctx, st, &lastProgress); err != nil {
			return err
		}
	}
}

// runPieces is what one run of a job knows of the plan's pieces it reads.
type runPieces struct {
	runID     string
	rate      int64            // the run's disk rate, bytes/s
	keeping   map[string]bool  // the copies it keeps as it reads
	fromStart map[string]int64 // what it read of each piece it read from the piece's start
	read      map[string]int64 // what it read of each piece, from copies and disk
}

// notePage records a page of piece pr read from disk: the node's disk reads, the rest of the piece
// at the run's rate (the next plan's base load on that node), the copy kept of it, and the piece's
// size when the run read it from its start.
func (s *Service) notePage(t *runPieces, pr *pieceRead, cursor []byte, resp *pb.ScanResponse, desc *pb.RangeDescriptor, read int64) {
	s.copies.noteRead(pr.node, read, false)
	t.read[pr.id] += read
	s.copies.reading(t.runID, pr.node, float64(t.rate), pr.size-float64(t.read[pr.id]))
	s.keep(pr, cursor, resp, desc, t.keeping)
	if bytes.Equal(cursor, pr.start) {
		t.fromStart[pr.id] = 0
	}
	if _, ok := t.fromStart[pr.id]; ok {
		t.fromStart[pr.id] += read
	}
}

// endPieces ends a run's pieces: after an error its kept copies are dropped (their followers read
// the rest from disk) and no piece's size is learnt (a piece cut short is no measure of it); else the
// pieces read whole give their sizes.
func (s *Service) endPieces(t *runPieces, err error) {
	if err != nil {
		for k := range t.keeping {
			s.copies.drop(k, shortKeeper)
		}
		return
	}
	s.mu.Lock()
	for id, n := range t.fromStart {
		s.sizes[id] = float64(n)
	}
	s.mu.Unlock()
}

// diskRate is the bytes/s a run reads from disk at: its plan's; for a run the plan served from copies
// that it must read from disk after all (a copy dropped or stalled), the slowest that still ends by
// nine tenths of its deadline, at most its job's rate (what reading on demand would take); else its
// job's rate, else the default.
func (s *Service) diskRate(job *pb.ScanJob, rp *runPlan, due time.Time) int64 {
	own := job.RateBytes
	if own <= 0 {
		own = s.cfg.RateBytes
	}
	switch {
	case rp != nil && rp.rate > 0:
		return rp.rate
	case rp != nil && len(rp.pieces) > 0:
		var size float64
		for _, p := range rp.pieces {
			size += p.size
		}
		left := due.Add(time.Duration(job.DeadlineMs) * time.Millisecond * 9 / 10).Sub(s.deps.Now())
		return min(own, int64(size/max(left.Seconds(), 0.1)))
	default:
		return own
	}
}

// diskPage reads the page of up to limit rows at cursor through the range's leader, hands its rows
// to sink and counts them in the run r.
func (s *Service) diskPage(ctx context.Context, cursor, end []byte, limit int, sink rowSink, r *pb.JobRun) (*pb.ScanResponse, *pb.RangeDescriptor, int64, error) {
	resp, desc, err := s.page(ctx, cursor, end, limit)
	if err != nil {
		return nil, nil, 0, err
	}
	var read int64
	for _, p := range resp.Kvs {
		if err := sink.row(p); err != nil {
			return nil, nil, 0, err
		}
		read += int64(len(p.Key) + len(p.Value))
	}
	r.Rows += int64(len(resp.Kvs))
	r.Bytes += read
	s.rows.Add(uint64(len(resp.Kvs)))
	s.bytes.Add(uint64(read))
	return resp, desc, read, nil
}

// progress records the run's progress once per ProgressEvery, and says when its job was removed.
func (s *Service) progress(ctx context.Context, st *pb.JobState, last *time.Time) error {
	now := s.deps.Now()
	if now.Sub(*last) < s.cfg.ProgressEvery {
		return nil
	}
	*last = now
	st.Running.ProgressUnixMs = now.UnixMilli()
	if ok, err := s.current(ctx, st.Job); err == nil && !ok {
		return fmt.Errorf("scan job %q was removed", st.Job.Name)
	}
	if err := s.saveState(ctx, st); err != nil {
		s.log.Debug("jobs: could not record progress", "job", st.Job.Name, "err", err)
	}
	return nil
}

// copyPoll is how often a run following a copy still being read looks for its new rows.
const copyPoll = 20 * time.Millisecond

// fromCopy hands sink the rows of pr's copy from cursor on and returns where the run goes on: the
// piece's end once the copy is complete (nil at the keyspace's end), or cursor itself when there is
// no copy (the run reads from disk). A copy still being read is followed as its prefetch (or the run
// keeping it) reads on, rather than read from the disk a second time; only a copy dropped, or one
// that did not grow for StaleAfter, leaves the rest to the disk (from how far the run got).
func (s *Service) fromCopy(ctx context.Context, pr *pieceRead, cursor []byte, sink rowSink, r *pb.JobRun) ([]byte, error) {
	key := pr.copyKey
	pr.copyKey = "" // read once: a later visit of the piece (a retry) reads from disk
	from := bytes.Clone(cursor)
	var n, count int64
	seen, grew := 0, time.Now()
	s.copies.follow(key)
	defer s.copies.unfollow(key)
	for {
		rows, _, done, ok := s.copies.peek(key)
		if !ok {
			s.copies.fellShort(shortGone)
			break // dropped: the rest from disk
		}
		if !done && len(rows) == seen && time.Since(grew) > s.cfg.StaleAfter {
			s.copies.fellShort(shortStalled)
			break // stalled: the rest from disk
		}
		if len(rows) > seen {
			grew = time.Now()
		}
		// The cursor moves once a batch, not once a row: it is only where the disk takes over.
		var last []byte
		for _, kv := range rows[seen:] {
			if bytes.Compare(kv.Key, cursor) < 0 {
				continue
			}
			if err := sink.row(kv); err != nil {
				return nil, err
			}
			n += int64(len(kv.Key) + len(kv.Value))
			count++
			last = kv.Key
		}
		if last != nil {
			cursor = append(bytes.Clone(last), 0)
		}
		seen = len(rows)
		if done {
			s.countCopy(r, n, count)
			s.mu.Lock()
			if bytes.Equal(from, pr.start) {
				s.sizes[pr.id] = float64(n)
			}
			s.mu.Unlock()
			if len(pr.end) == 0 {
				return nil, nil
			}
			return bytes.Clone(pr.end), nil
		}
		if err := stopper.SleepContext(ctx, copyPoll); err != nil {
			return nil, err
		}
	}
	s.countCopy(r, n, count)
	return cursor, nil
}

// countCopy counts rows a run read from a copy.
func (s *Service) countCopy(r *pb.JobRun, n, count int64) {
	r.Rows += count
	r.Bytes += n
	r.CacheBytes += n
	s.rows.Add(uint64(count))
	s.bytes.Add(uint64(n))
	s.cacheBytes.Add(uint64(n))
}

// keep copies a page a run read from disk into the copy its plan keeps of the piece, from the
// piece's start only (a copy is whole or nothing).
func (s *Service) keep(pr *pieceRead, cursor []byte, resp *pb.ScanResponse, desc *pb.RangeDescriptor, keeping map[string]bool) {
	if pr.keepKey == "" {
		return
	}
	if !keeping[pr.keepKey] {
		s.mu.Lock()
		rel := s.plan.releaseOf(pr.keepKey, s.cfg.PlanHorizon)
		s.mu.Unlock()
		if !bytes.Equal(cursor, pr.start) || !s.copies.begin(pr.keepKey, pr.piece, rel, nil) {
			pr.keepKey = ""
			return
		}
		keeping[pr.keepKey] = true
	}
	next := desc.EndKey
	if resp.Truncated && len(resp.Kvs) > 0 {
		next = append(bytes.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
	}
	if !s.copies.add(pr.keepKey, resp.Kvs, next) {
		pr.keepKey = ""
		return
	}
	if !resp.Truncated && (len(desc.EndKey) == 0 || (len(pr.end) > 0 && bytes.Compare(desc.EndKey, pr.end) >= 0)) {
		s.copies.finish(pr.keepKey)
		pr.keepKey = ""
	}
}

// page reads up to limit rows of [cursor, end) from the range holding cursor, on its leader, through
// the range layer's ordinary scan; it returns the answer and the range that served it.
func (s *Service) page(ctx context.Context, cursor, end []byte, limit int) (*pb.ScanResponse, *pb.RangeDescriptor, error) {
	return s.turnPage(ctx, 0, cursor, end, limit)
}

// turnPage is page for a prefetch of a piece on node (0: none), each attempt in that node's disk turn
// (diskTurns) and the backoff between attempts out of it, so that a range being elected or moved
// holds up no other prefetch of the node.
func (s *Service) turnPage(ctx context.Context, node uint64, cursor, end []byte, limit int) (*pb.ScanResponse, *pb.RangeDescriptor, error) {
	// Labelled as the jobs' reads, here and on the leader it is forwarded to: its engine counts their
	// blocks apart, so the foreground's hit ratio is measured without them. A prefetch's go in the
	// disk's idle class; a run's do not (storage.Engine.IterateFor says why).
	ctx = kv.JobRead(ctx)
	if node != 0 {
		ctx = kv.PrefetchRead(ctx)
	}
	var lastErr error
	backoff := 50 * time.Millisecond
	for attempt := 0; attempt < pageAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
		desc, err := s.deps.Ranges.LookupRange(ctx, cursor)
		if err != nil {
			lastErr = err
			continue
		}
		req := &pb.ScanRequest{Header: &pb.RequestHeader{RangeId: desc.RangeId}, Start: cursor, End: minEnd(desc.EndKey, end), Limit: int64(limit)}
		var resp *pb.ScanResponse
		release := func() {}
		if node != 0 {
			if release, err = s.turns.take(ctx, node); err != nil {
				return nil, nil, err
			}
		}
		err = s.deps.Ranges.OnLeader(ctx, desc.RangeId, func(*replica.Replica) error {
			r, err := s.deps.Ranges.Scan(ctx, req)
			if err != nil {
				return err
			}
			resp = r
			return kv.FromPB(r.Error)
		}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
			r, err := c.Scan(ctx, req)
			if err != nil {
				return nil, err
			}
			resp = r
			return r.Error, nil
		})
		release()
		if err != nil {
			lastErr = err
			if code := kv.ToPBError(err).Code; code == pb.ErrorCode_INVALID_ARGUMENT || ctx.Err() != nil {
				break
			}
			continue
		}
		served := resp.Range
		if served == nil || served.RangeId == 0 {
			served = desc
		}
		if len(served.EndKey) > 0 && bytes.Compare(served.EndKey, cursor) <= 0 {
			lastErr = fmt.Errorf("range %d answered for a span that ends before %q", served.RangeId, cursor)
			continue
		}
		return resp, served, nil
	}
	return nil, nil, fmt.Errorf("read at %q: %w", cursor, lastErr)
}

// overlapping counts the ranges that hold part of [start, end).
func overlapping(ranges []*pb.RangeDescriptor, start, end []byte) int {
	n := 0
	for _, d := range ranges {
		if (len(d.EndKey) == 0 || bytes.Compare(d.EndKey, start) > 0) && (len(end) == 0 || bytes.Compare(d.StartKey, end) < 0) {
			n++
		}
	}
	return n
}

// minEnd returns the smaller of two exclusive end keys, where empty is +inf.
func minEnd(a, b []byte) []byte {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0 || bytes.Compare(a, b) <= 0:
		return a
	default:
		return b
	}
}

// rowSink is what a run does with the rows: count them, or export them.
type rowSink interface {
	open() error
	row(*pb.KeyValue) error
}

type counter struct{}

func (*counter) open() error            { return nil }
func (*counter) row(*pb.KeyValue) error { return nil }

// exporter writes a run's rows as JSON lines ({"key","value"}: UTF-8 text as is, anything else in
// base64 with "key_encoding"/"value_encoding": "base64") to a temporary file, renamed into place once
// the run is done so that a reader never sees half an export.
type exporter struct {
	dir, name string
	f         *os.File
	w         *bufio.Writer
	enc       *json.Encoder
}

func (e *exporter) path() string { return filepath.Join(e.dir, e.name) }

func (e *exporter) open() error {
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return fmt.Errorf("export directory: %w", err)
	}
	f, err := os.CreateTemp(e.dir, "."+e.name+".*")
	if err != nil {
		return fmt.Errorf("export file: %w", err)
	}
	e.f, e.w = f, bufio.NewWriterSize(f, 1<<20)
	e.enc = json.NewEncoder(e.w)
	return nil
}

type exportRow struct {
	Key           string `json:"key"`
	KeyEncoding   string `json:"key_encoding,omitempty"`
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding,omitempty"`
}

func text(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func (e *exporter) row(p *pb.KeyValue) error {
	var r exportRow
	r.Key, r.KeyEncoding = text(p.Key)
	r.Value, r.ValueEncoding = text(p.Value)
	if err := e.enc.Encode(r); err != nil {
		return fmt.Errorf("export to %s: %w", e.path(), err)
	}
	return nil
}

// close finishes the export: renamed into place when keep, else removed.
func (e *exporter) close(keep bool) error {
	if e.f == nil {
		return nil
	}
	tmp := e.f.Name()
	err := e.w.Flush()
	if err == nil && keep {
		err = e.f.Sync()
	}
	if cerr := e.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && keep {
		err = os.Rename(tmp, e.path())
	}
	if err != nil || !keep {
		os.Remove(tmp)
	}
	if err != nil {
		return fmt.Errorf("export to %s: %w", e.path(), err)
	}
	return nil
}
