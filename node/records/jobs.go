package records

// Scan jobs live under one prefix: 'J' 0x01 <name> holds a job's spec (pb.ScanJob) and 'J' 0x02 <name>
// what its runs left (pb.JobState without the spec). Two keys, so that adding or removing a job never
// races with the runner's writes of progress: a state without a spec is a removed job's leftover.
const (
	jobPrefix      = 'J'
	jobSpecMark    = 0x01
	jobStateMark   = 0x02
	jobMarkEndSpec = jobSpecMark + 1
	jobMarkEnd     = jobStateMark + 1
)

// JobKey is the meta key of a scan job's spec.
func JobKey(name string) []byte { return append([]byte{jobPrefix, jobSpecMark}, name...) }

// JobStateKey is the meta key of a scan job's run state.
func JobStateKey(name string) []byte { return append([]byte{jobPrefix, jobStateMark}, name...) }

// JobSpan is the meta span of every job's spec.
func JobSpan() (start, end []byte) {
	return []byte{jobPrefix, jobSpecMark}, []byte{jobPrefix, jobMarkEndSpec}
}

// JobStateSpan is the meta span of every job's run state.
func JobStateSpan() (start, end []byte) {
	return []byte{jobPrefix, jobStateMark}, []byte{jobPrefix, jobMarkEnd}
}

// JobName is the job name a key of JobSpan or JobStateSpan holds.
func JobName(key []byte) string {
	if len(key) < 2 {
		return ""
	}
	return string(key[2:])
}
