package jobs

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
)

// Bounds of a job's settings.
const (
	// MinEvery is the shortest period: the scheduler looks for due runs a few times a second.
	MinEvery = time.Second
	// MaxNameLen bounds a job's name.
	MaxNameLen = 128
)

// Add stores a new job, checked; the first run is due at once. It returns the stored job and a
// warning for a setting that is allowed but likely not meant (a deadline not shorter than the period).
// Bad settings are INVALID_ARGUMENT errors that say what to change.
func (s *Service) Add(ctx context.Context, job *pb.ScanJob) (*pb.ScanJob, string, error) {
	job = proto.Clone(job).(*pb.ScanJob)
	warning, err := check(job)
	if err != nil {
		return nil, "", err
	}
	if job.Table != "" {
		if job.Start, job.End, err = s.tableSpan(ctx, job.Table); err != nil {
			return nil, "", err
		}
	}
	existing, err := s.load(ctx, job.Name)
	if err != nil {
		return nil, "", err
	}
	if len(existing) > 0 {
		return nil, "", kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "a scan job named %q exists: remove it first (shoal job remove %s)", job.Name, job.Name)
	}
	job.CreatedUnixMs = s.deps.Now().UnixMilli()
	b, err := proto.Marshal(job)
	if err != nil {
		return nil, "", err
	}
	// The spec and a fresh state in one command: nothing of an earlier job of this name stays.
	cmd := &pb.Command{Mutations: []*pb.Mutation{
		{Key: records.JobKey(job.Name), Value: b},
		{Key: records.JobStateKey(job.Name), Delete: true},
	}}
	if _, err := s.deps.Ranges.ProposeMeta(ctx, cmd); err != nil {
		return nil, "", fmt.Errorf("store scan job %q in the meta range: %w", job.Name, err)
	}
	return job, warning, nil
}

// check validates a job's settings as a user gave them.
func check(job *pb.ScanJob) (warning string, err error) {
	bad := func(format string, args ...any) (string, error) {
		return "", kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT, format, args...)
	}
	if job == nil {
		return bad("no job given")
	}
	if job.Name == "" || len(job.Name) > MaxNameLen {
		return bad("a job needs a name of 1 to %d bytes", MaxNameLen)
	}
	for _, c := range job.Name {
		if !(c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return bad("job name %q: use letters, digits, '_', '-' and '.'", job.Name)
		}
	}
	hasSpan := len(job.Start) > 0 || len(job.End) > 0
	switch {
	case job.Table != "" && hasSpan:
		return bad("job %q: give a span or a table, not both", job.Name)
	case job.Table == "" && !hasSpan:
		return bad("job %q: give the span to read (--span START..END) or a table (--table T)", job.Name)
	case len(job.End) > 0 && bytes.Compare(job.Start, job.End) >= 0:
		return bad("job %q: span %q..%q is empty: its start must sort before its end (an empty end reads to the last key)", job.Name, job.Start, job.End)
	}
	if job.EveryMs < 0 || job.DeadlineMs < 0 || job.RateBytes < 0 {
		return bad("job %q: period, deadline and rate must not be negative", job.Name)
	}
	every, deadline := time.Duration(job.EveryMs)*time.Millisecond, time.Duration(job.DeadlineMs)*time.Millisecond
	if every < MinEvery {
		return bad("job %q: its period (--every) must be at least %v", job.Name, MinEvery)
	}
	if deadline <= 0 {
		return bad("job %q: give a positive deadline (--deadline), how long after a run is due it must be done", job.Name)
	}
	switch {
	case job.Count && job.OutputDir != "":
		return bad("job %q: a job counts its rows (--count) or exports them (--output DIR), not both", job.Name)
	case !job.Count && job.OutputDir == "":
		return bad("job %q: say what a run does: --count or --output DIR", job.Name)
	case job.OutputDir != "" && !filepath.IsAbs(job.OutputDir):
		return bad("job %q: the output directory %q must be an absolute path (on the node that runs the job)", job.Name, job.OutputDir)
	}
	if deadline >= every {
		warning = fmt.Sprintf("the deadline (%v) is not shorter than the period (%v): a run may still be going when the next is due; the next then starts when it ends, late, never twice at once", deadline, every)
	}
	return warning, nil
}

// tableSpan reads the table's descriptor through the range layer and returns the span of its rows.
func (s *Service) tableSpan(ctx context.Context, name string) (start, end []byte, err error) {
	key := table.DescriptorKey(name)
	resp, _, err := s.page(ctx, key, append(bytes.Clone(key), 0), 1)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: read its descriptor: %w", name, err)
	}
	if len(resp.Kvs) == 0 || !bytes.Equal(resp.Kvs[0].Key, key) {
		return nil, nil, kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "unknown table %q: `shoal table list` shows the tables", name)
	}
	d, err := table.DecodeDescriptor(name, resp.Kvs[0].Value)
	if err != nil {
		return nil, nil, err
	}
	start, end = table.TableSpan(d.ID)
	return start, end, nil
}

// Remove deletes a job and what its runs recorded; a run going on stops at its next page. It reports
// whether the job existed.
func (s *Service) Remove(ctx context.Context, name string) (bool, error) {
	existing, err := s.load(ctx, name)
	if err != nil {
		return false, err
	}
	if len(existing) == 0 {
		return false, nil
	}
	cmd := &pb.Command{Mutations: []*pb.Mutation{
		{Key: records.JobKey(name), Delete: true},
		{Key: records.JobStateKey(name), Delete: true},
	}}
	if _, err := s.deps.Ranges.ProposeMeta(ctx, cmd); err != nil {
		return false, fmt.Errorf("remove scan job %q from the meta range: %w", name, err)
	}
	s.mu.Lock()
	if cancel, ok := s.running[name]; ok {
		cancel()
	}
	s.mu.Unlock()
	return true, nil
}

// Jobs returns the jobs (one when name is set) with their states, by name.
func (s *Service) Jobs(ctx context.Context, name string) ([]*pb.JobState, error) {
	jobs, err := s.load(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.JobState, 0, len(jobs))
	for _, st := range jobs {
		if st.NextDueUnixMs == 0 {
			st.NextDueUnixMs = st.Job.CreatedUnixMs
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job.Name < out[j].Job.Name })
	return out, nil
}
