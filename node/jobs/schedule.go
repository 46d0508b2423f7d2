package jobs

import (
	"time"

	"github.com/shoaldb/shoal/pb"
)

// The schedule of a job: runs are due at created + k·every (k = 0, 1, …); a run must be done by its due
// time plus the deadline. These functions are pure (the caller passes the clock), so that the rules
// below are tested without waiting:
//
//   - a run starts at the first tick at or after its due time, unless a run of the job is still going;
//   - a run that could not start in time (the previous one overran, or no node led the meta range)
//     starts as soon as it can, for the latest due time passed, and the due times between are
//     skipped (counted, never made up): a job is never run twice at once nor twice for one due time;
//   - a run is on time when it finishes by due + deadline, else late by the difference.

// Decision is what the scheduler does with a job at one tick.
type Decision struct {
	// Start says a run starts now, for the due time Due.
	Start bool
	Due   time.Time
	// Next is the due time after Due: the job's next_due once this run starts.
	Next time.Time
	// Skipped counts the due times before Due that no run will serve.
	Skipped int64
}

// Decide says whether a run of job starts at now. next is the job's next due time (zero before its
// first run), busy whether a run of the job is still going.
func Decide(job *pb.ScanJob, next time.Time, busy bool, now time.Time) Decision {
	every := time.Duration(job.EveryMs) * time.Millisecond
	created := time.UnixMilli(job.CreatedUnixMs)
	if next.IsZero() || next.Before(created) {
		next = created
	}
	if busy || every <= 0 || now.Before(next) {
		return Decision{}
	}
	// The latest due time at or before now.
	k := int64(now.Sub(created) / every)
	due := created.Add(time.Duration(k) * every)
	skipped := int64(due.Sub(next) / every)
	return Decision{Start: true, Due: due, Next: due.Add(every), Skipped: skipped}
}

// Lateness says whether a run due at due, with the job's deadline, that finished at finished was on
// time, and if not by how much it was late.
func Lateness(due time.Time, deadline time.Duration, finished time.Time) (onTime bool, late time.Duration) {
	late = finished.Sub(due.Add(deadline))
	if late <= 0 {
		return true, 0
	}
	return false, late
}

// runGoing reports whether a run of a job is going, at one tick of the scheduler: one this node runs
// now (running); one it ran when the tick read the job's state (ranAtRead), which may since have
// recorded its outcome and ended, so that the state read is stale and abandoning its run would
// overwrite that outcome; or another node's that still records progress (heldElsewhere).
func runGoing(running, ranAtRead bool, run *pb.JobRun, self uint64, now time.Time, staleAfter time.Duration) bool {
	return running || ranAtRead || heldElsewhere(run, self, now, staleAfter)
}

// heldElsewhere reports whether run (a job's recorded run in progress) belongs to another node that
// still records progress: the scheduler leaves it alone. A run of this node that this node does not
// know (it restarted), or one whose node fell silent for staleAfter, is abandoned.
func heldElsewhere(run *pb.JobRun, self uint64, now time.Time, staleAfter time.Duration) bool {
	if run == nil || run.NodeId == self {
		return false
	}
	return now.Sub(time.UnixMilli(run.ProgressUnixMs)) < staleAfter
}
