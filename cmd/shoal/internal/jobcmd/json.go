package jobcmd

import (
	"time"

	"github.com/shoaldb/shoal/pb"
)

// jobJSON is the shape `job status --format json` prints (and `job list` an array of).
type jobJSON struct {
	Name      string    `json:"name"`
	Span      spanJSON  `json:"span"`
	Table     string    `json:"table,omitempty"`
	Every     string    `json:"every"`
	Deadline  string    `json:"deadline"`
	Action    string    `json:"action"` // "count" or "export"
	OutputDir string    `json:"output_dir,omitempty"`
	Created   string    `json:"created"`
	NextDue   string    `json:"next_due"`
	Runs      int64     `json:"runs"`
	Late      int64     `json:"late"`
	Skipped   int64     `json:"skipped"`
	Admission string    `json:"admission,omitempty"` // the prefetch plan's verdict: "admitted" or why not
	Refused   int64     `json:"refused,omitempty"`   // due times the plan refused
	Running   *runJSON  `json:"running"`
	Last      []runJSON `json:"last"`
}

type spanJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

type runJSON struct {
	Due         string `json:"due"`
	Started     string `json:"started"`
	Finished    string `json:"finished,omitempty"`
	Node        uint64 `json:"node"`
	Rows        int64  `json:"rows"`
	Bytes       int64  `json:"bytes"`
	RangesDone  int64  `json:"ranges_done"`
	RangesTotal int64  `json:"ranges_total,omitempty"`
	OnTime      bool   `json:"on_time"`
	LateMs      int64  `json:"late_ms"`
	Error       string `json:"error,omitempty"`
	Output      string `json:"output,omitempty"`
	CacheBytes  int64  `json:"cache_bytes,omitempty"` // read from a prefetched or kept copy
}

func timeText(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func jobJSONOf(st *pb.JobState) jobJSON {
	j := st.Job
	v := jobJSON{Name: j.Name, Span: spanJSON{Start: string(j.Start), End: string(j.End)}, Table: j.Table,
		Every: (time.Duration(j.EveryMs) * time.Millisecond).String(), Deadline: (time.Duration(j.DeadlineMs) * time.Millisecond).String(),
		Action: "count", OutputDir: j.OutputDir, Created: timeText(j.CreatedUnixMs), NextDue: timeText(st.NextDueUnixMs),
		Runs: st.Runs, Late: st.Late, Skipped: st.Skipped, Admission: st.Admission, Refused: st.Refused, Last: []runJSON{}}
	if j.OutputDir != "" {
		v.Action = "export"
	}
	if st.Running != nil {
		r := runJSONOf(st.Running)
		v.Running = &r
	}
	for _, r := range st.Last {
		v.Last = append(v.Last, runJSONOf(r))
	}
	return v
}

func runJSONOf(r *pb.JobRun) runJSON {
	return runJSON{Due: timeText(r.DueUnixMs), Started: timeText(r.StartedUnixMs), Finished: timeText(r.FinishedUnixMs), Node: r.NodeId,
		Rows: r.Rows, Bytes: r.Bytes, RangesDone: r.RangesDone, RangesTotal: r.RangesTotal, OnTime: r.OnTime, LateMs: r.LateMs,
		Error: r.Error, Output: r.Output, CacheBytes: r.CacheBytes}
}
