package apijson

import (
	"sort"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// JobJSON is one scan job as shown by /api/jobs and the dashboard: its spec, its schedule and
// counts, the run going on and the last outcomes (newest first). Times are RFC 3339 in UTC, empty
// when not reached. Its fields keep the names `shoal job list --format json` prints.
type JobJSON struct {
	Name      string   `json:"name"`
	Span      SpanJSON `json:"span"`
	Table     string   `json:"table,omitempty"`
	Every     string   `json:"every"`
	Deadline  string   `json:"deadline"`
	Action    string   `json:"action"` // "count" or "export"
	OutputDir string   `json:"output_dir,omitempty"`
	RateBytes int64    `json:"rate_bytes"` // the job's read pace (bytes/s); 0: the node's default
	Created   string   `json:"created"`
	NextDue   string   `json:"next_due"`
	Runs      int64    `json:"runs"`
	// OnTime is the runs that finished by their deadline; Late the others, failed ones included (the
	// cluster keeps one count of both); LastFailed the failures among Last.
	OnTime     int64 `json:"on_time"`
	Late       int64 `json:"late"`
	LastFailed int64 `json:"last_failed"`
	// Skipped is the due times passed while a run was still going, Refused those the prefetch plan
	// refused; Admission is the plan's verdict ("admitted" or why not; empty without a plan).
	Skipped   int64     `json:"skipped"`
	Refused   int64     `json:"refused"`
	Admission string    `json:"admission,omitempty"`
	Running   *RunJSON  `json:"running"`
	Last      []RunJSON `json:"last"`
}

// SpanJSON is a job's key span in the convention of Key.
type SpanJSON struct {
	Start         string `json:"start"`
	StartEncoding string `json:"start_encoding,omitempty"`
	End           string `json:"end"`
	EndEncoding   string `json:"end_encoding,omitempty"`
}

// RunJSON is one run of a job: going on while Finished is empty (Progress is then when its node last
// recorded it). Outcome is "running", "on time", "late" or "failed".
type RunJSON struct {
	Due         string `json:"due"`
	Started     string `json:"started"`
	Finished    string `json:"finished,omitempty"`
	Progress    string `json:"progress,omitempty"`
	Node        uint64 `json:"node"`
	Rows        int64  `json:"rows"`
	Bytes       int64  `json:"bytes"`
	RangesDone  int64  `json:"ranges_done"`
	RangesTotal int64  `json:"ranges_total"`
	Outcome     string `json:"outcome"`
	OnTime      bool   `json:"on_time"`
	LateMs      int64  `json:"late_ms"`
	Error       string `json:"error,omitempty"`
	Output      string `json:"output,omitempty"`
	CacheBytes  int64  `json:"cache_bytes"` // read from a prefetched or kept copy rather than the disk
}

// msText is a time in milliseconds since the epoch as unixText writes one.
func msText(ms int64) string { return unixText(ms * int64(time.Millisecond)) }

func durationText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// JobsJSON converts job states, ordered by name. It never returns nil, and a job's Last is never nil.
func JobsJSON(jobs []*pb.JobState) []JobJSON {
	out := make([]JobJSON, 0, len(jobs))
	for _, st := range jobs {
		if st.GetJob() == nil {
			continue
		}
		out = append(out, Job(st))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Job converts one job state (its Job set).
func Job(st *pb.JobState) JobJSON {
	j := st.GetJob()
	v := JobJSON{Name: j.GetName(), Table: j.GetTable(), Every: durationText(j.GetEveryMs()), Deadline: durationText(j.GetDeadlineMs()),
		Action: "count", OutputDir: j.GetOutputDir(), RateBytes: j.GetRateBytes(), Created: msText(j.GetCreatedUnixMs()),
		NextDue: msText(st.GetNextDueUnixMs()), Runs: st.GetRuns(), OnTime: max(0, st.GetRuns()-st.GetLate()), Late: st.GetLate(),
		Skipped: st.GetSkipped(), Refused: st.GetRefused(), Admission: st.GetAdmission(), Last: []RunJSON{}}
	if j.GetOutputDir() != "" {
		v.Action = "export"
	}
	v.Span.Start, v.Span.StartEncoding = Key(j.GetStart())
	v.Span.End, v.Span.EndEncoding = Key(j.GetEnd())
	if r := st.GetRunning(); r != nil {
		rj := runJSON(r)
		v.Running = &rj
	}
	for _, r := range st.GetLast() {
		rj := runJSON(r)
		if rj.Outcome == "failed" {
			v.LastFailed++
		}
		v.Last = append(v.Last, rj)
	}
	return v
}

func runJSON(r *pb.JobRun) RunJSON {
	v := RunJSON{Due: msText(r.GetDueUnixMs()), Started: msText(r.GetStartedUnixMs()), Finished: msText(r.GetFinishedUnixMs()),
		Node: r.GetNodeId(), Rows: r.GetRows(), Bytes: r.GetBytes(), RangesDone: r.GetRangesDone(), RangesTotal: r.GetRangesTotal(),
		OnTime: r.GetOnTime(), LateMs: r.GetLateMs(), Error: r.GetError(), Output: r.GetOutput(), CacheBytes: r.GetCacheBytes()}
	switch {
	case r.GetFinishedUnixMs() == 0:
		v.Outcome, v.Progress = "running", msText(r.GetProgressUnixMs())
	case r.GetError() != "":
		v.Outcome = "failed"
	case r.GetOnTime():
		v.Outcome = "on time"
	default:
		v.Outcome = "late"
	}
	return v
}
