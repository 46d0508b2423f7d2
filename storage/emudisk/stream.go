package emudisk

// Stream charges a device for a file read or written outside its filesystem, with the operating
// system's own calls (a backup's files: package backup writes them through a buffered *os.File), so
// that such I/O costs the node's disk what it would cost a real one and contends with the engine's.
// The caller reports the bytes as they pass through its buffer; the stream charges one operation per
// full chunk (the buffer's size: what the buffered reader or writer issues) and the rest when the
// caller flushes or syncs. Each charge waits as an operation through the device would. A nil *Stream
// (a nil device's) charges nothing. Not safe for concurrent use: each file has its own.
type Stream struct {
	d       *Device
	kind    op
	chunk   int64
	pending int64
}

// WriteStream returns a stream charging writes of chunk bytes to d (nil when d is nil).
func (d *Device) WriteStream(chunk int64) *Stream { return d.stream(opWrite, chunk) }

// ReadStream returns a stream charging reads of chunk bytes to d (nil when d is nil).
func (d *Device) ReadStream(chunk int64) *Stream { return d.stream(opRead, chunk) }

func (d *Device) stream(kind op, chunk int64) *Stream {
	if d == nil {
		return nil
	}
	return &Stream{d: d, kind: kind, chunk: max(chunk, 1)}
}

// Add counts n more bytes, charging an operation for every full chunk pending.
func (s *Stream) Add(n int64) {
	if s == nil || n <= 0 {
		return
	}
	s.pending += n
	for s.pending >= s.chunk {
		s.d.charge(s.kind, s.chunk)
		s.pending -= s.chunk
	}
}

// Flush charges the bytes pending as one operation (a buffer flushed before it filled).
func (s *Stream) Flush() {
	if s == nil || s.pending == 0 {
		return
	}
	s.d.charge(s.kind, s.pending)
	s.pending = 0
}

// Sync flushes and, on a write stream, charges a sync.
func (s *Stream) Sync() {
	if s == nil {
		return
	}
	s.Flush()
	if s.kind == opWrite {
		s.d.charge(opSync, 0)
	}
}
