// Package backup is the on-disk format of a Shoal backup: MANIFEST.json plus one file per range holding
// that range's user key/value pairs as length-prefixed records, each file checked by a CRC-32C and a
// key count recorded in the manifest, and a key index (every key with a hash of its value) that the
// next incremental backup diffs against. An incremental backup's range files hold only the keys put
// and deleted since its parent, whose manifest it names with a checksum; a chain of them (chain.go)
// is verified link by link and merged (merge.go) in an order planned by plan/mergeplan.
//
// It owns writing, reading, verifying and merging that format and nothing else: it never talks to a
// cluster or an engine. node/backups writes backups from a checkpoint of a node's engine (`shoal admin
// backup`); `shoal restore` reads them back into a cluster through the normal write path.
package backup

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Version of the format written by this package. Versions 1 (full backups without a key index) and 2
// (every backup with a full key index) are still read.
const Version = 3

// ManifestFile is the manifest's name inside a backup directory; it is written last, so a directory
// without it is an incomplete backup.
const ManifestFile = "MANIFEST.json"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes one backup.
type Manifest struct {
	Version int `json:"version"`
	// ID names this backup for its children (random, set by WriteManifest when empty).
	ID        string    `json:"id,omitempty"`
	ClusterID string    `json:"cluster_id"`
	NodeID    uint64    `json:"node_id"`
	CreatedAt time.Time `json:"created_at"`
	// DurationMS is how long the backup took, from the checkpoint to the manifest.
	DurationMS int64 `json:"duration_ms"`
	// Parent is the backup this one holds the changes since; nil for a full backup.
	Parent       *Parent      `json:"parent,omitempty"`
	Ranges       []RangeEntry `json:"ranges"`
	TotalKeys    uint64       `json:"total_keys"`
	TotalDeletes uint64       `json:"total_deletes,omitempty"`
	TotalBytes   uint64       `json:"total_bytes"`
	// Index lists every key the backup implies with a hash of its value (index.go).
	Index *FileInfo `json:"index,omitempty"`
	// RolledUp names the backups of the chain a compaction merged into this full backup.
	RolledUp []string `json:"rolled_up,omitempty"`
	// Journal is the node's change journal at the checkpoint: every write the backup lacks is
	// journaled under a later epoch, so an incremental against it on the same node reads the journal.
	Journal *JournalMark `json:"journal,omitempty"`
	// Method says how an incremental found its changes: "journal" (the node's change journal since
	// the parent's mark) or "diff" (every key against the parent's key index); Fallback says why an
	// incremental diffed.
	Method   string `json:"method,omitempty"`
	Fallback string `json:"fallback,omitempty"`
}

// JournalMark names a node's change journal (its id) and the epoch a backup closed.
type JournalMark struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// Parent is a child's link to its parent: the parent's id, its directory when the child was taken,
// and the CRC-32C of the parent's manifest, so a replaced or altered parent is refused.
type Parent struct {
	ID             string `json:"id"`
	Dir            string `json:"dir"`
	ManifestCRC32C uint32 `json:"manifest_crc32c"`
}

// Incremental says whether m holds changes against a parent.
func (m *Manifest) Incremental() bool { return m.Parent != nil }

// FileInfo is a checked file of a backup.
type FileInfo struct {
	File    string `json:"file"`
	Keys    uint64 `json:"keys"`
	Deletes uint64 `json:"deletes,omitempty"`
	Bytes   uint64 `json:"bytes"`
	CRC32C  uint32 `json:"crc32c"`
	// Delta: an index of the changes since the parent (index.go), not of every key.
	Delta bool `json:"delta,omitempty"`
}

// RangeEntry is one range of a backup: its span and descriptor generation, the raft index its replica
// had applied at the checkpoint, and its data file with the file's key count, byte count and CRC.
type RangeEntry struct {
	RangeID      uint64 `json:"range_id"`
	StartKey     []byte `json:"start_key"`
	EndKey       []byte `json:"end_key"`
	Generation   uint64 `json:"generation"`
	AppliedIndex uint64 `json:"applied_index"`
	// CaughtUp is false when the node's replica could not confirm, before the checkpoint, that it had
	// applied everything its leader had: writes acknowledged just before the backup may be missing.
	CaughtUp bool `json:"caught_up"`
	// Delta is true when the file holds the span's changes since the parent (puts and deletions);
	// false when it holds the span's every key, whatever older backups of the chain say.
	Delta   bool   `json:"delta,omitempty"`
	File    string `json:"file"`
	Keys    uint64 `json:"keys"`
	Deletes uint64 `json:"deletes,omitempty"`
	Bytes   uint64 `json:"bytes"`
	CRC32C  uint32 `json:"crc32c"`
}

// Contains says whether key is in e's span.
func (e *RangeEntry) Contains(key []byte) bool {
	return string(key) >= string(e.StartKey) && (len(e.EndKey) == 0 || string(key) < string(e.EndKey))
}

// RangeFile is the name of a range's data file.
func RangeFile(rangeID uint64) string { return fmt.Sprintf("range-%d.kv", rangeID) }

// fileWriter is a buffered, checksummed, counted file written once and synced on close.
type fileWriter struct {
	f     *os.File
	w     *bufio.Writer
	crc   uint32
	bytes uint64
	buf   [binary.MaxVarintLen64]byte
}

func createFile(path string) (*fileWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("backup: create %s: %w", filepath.Base(path), err)
	}
	return &fileWriter{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (w *fileWriter) put(p []byte) error {
	w.crc = crc32.Update(w.crc, castagnoli, p)
	w.bytes += uint64(len(p))
	if _, err := w.w.Write(p); err != nil {
		return fmt.Errorf("backup: write %s: %w", filepath.Base(w.f.Name()), err)
	}
	return nil
}

func (w *fileWriter) uvarint(v uint64) error {
	n := binary.PutUvarint(w.buf[:], v)
	return w.put(w.buf[:n])
}

func (w *fileWriter) bytesField(p []byte) error {
	if err := w.uvarint(uint64(len(p))); err != nil {
		return err
	}
	return w.put(p)
}

func (w *fileWriter) close() error {
	err := w.w.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: close %s: %w", filepath.Base(w.f.Name()), err)
	}
	return nil
}

// abort closes and removes a file that will not be finished.
func (w *fileWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// Writer writes one range's data file: plain records (key, value) for a full range, or tagged records
// (key, value or deletion) for a delta.
type Writer struct {
	fw      *fileWriter
	delta   bool
	keys    uint64
	deletes uint64
}

// Create starts the data file of rangeID in dir (which must exist) holding the range's every key.
func Create(dir string, rangeID uint64) (*Writer, error) {
	fw, err := createFile(filepath.Join(dir, RangeFile(rangeID)))
	if err != nil {
		return nil, err
	}
	return &Writer{fw: fw}, nil
}

// CreateDelta starts the data file of rangeID in dir holding the range's changes since the parent.
func CreateDelta(dir string, rangeID uint64) (*Writer, error) {
	w, err := Create(dir, rangeID)
	if w != nil {
		w.delta = true
	}
	return w, err
}

// Add appends one key/value pair (in a delta: the key's new value).
func (w *Writer) Add(key, value []byte) error {
	if err := w.fw.bytesField(key); err != nil {
		return err
	}
	if w.delta {
		// Tag 0 is a deletion; a value is tagged with its length plus one.
		if err := w.fw.uvarint(uint64(len(value)) + 1); err != nil {
			return err
		}
		if err := w.fw.put(value); err != nil {
			return err
		}
	} else if err := w.fw.bytesField(value); err != nil {
		return err
	}
	w.keys++
	return nil
}

// Delete records that key was deleted since the parent; only a delta holds deletions.
func (w *Writer) Delete(key []byte) error {
	if !w.delta {
		return errors.New("backup: a deletion in a full range file")
	}
	if err := w.fw.bytesField(key); err != nil {
		return err
	}
	if err := w.fw.uvarint(0); err != nil {
		return err
	}
	w.deletes++
	return nil
}

// Bytes is the number of bytes written so far.
func (w *Writer) Bytes() uint64 { return w.fw.bytes }

// Abort removes the unfinished file.
func (w *Writer) Abort() { w.fw.abort() }

// Close flushes and syncs the file and fills e's file, kind, count and checksum fields.
func (w *Writer) Close(e *RangeEntry) error {
	if err := w.fw.close(); err != nil {
		return err
	}
	e.File, e.Delta, e.Keys, e.Deletes, e.Bytes, e.CRC32C = filepath.Base(w.fw.f.Name()), w.delta, w.keys, w.deletes, w.fw.bytes, w.fw.crc
	return nil
}

// NewID returns a random backup id.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("backup: no randomness: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// WriteManifest writes m as the backup's manifest, durably (temp file, sync, rename).
func WriteManifest(dir string, m *Manifest) error {
	m.Version = Version
	if m.ID == "" {
		m.ID = NewID()
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("backup: write manifest: %w", err)
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestFile))
	}
	if err != nil {
		return fmt.Errorf("backup: write manifest: %w", err)
	}
	return nil
}

// ErrIncomplete is returned by ReadManifest for a directory without a manifest (an interrupted backup).
var ErrIncomplete = errors.New("backup: no manifest (not a backup, or an interrupted one)")

// ReadManifest reads and checks the manifest of the backup in dir.
func ReadManifest(dir string) (*Manifest, error) {
	m, _, err := readManifest(dir)
	return m, err
}

// readManifest is ReadManifest with the CRC-32C of the manifest's bytes (a child's link checks it).
func readManifest(dir string) (*Manifest, uint32, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrIncomplete, dir)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("backup: read manifest: %w", err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, 0, fmt.Errorf("%w: manifest of %s: %v", ErrCorrupt, dir, err)
	}
	if m.Version < 1 || m.Version > Version {
		return nil, 0, fmt.Errorf("backup: manifest version %d, this binary reads versions 1 to %d", m.Version, Version)
	}
	return m, crc32.Checksum(data, castagnoli), nil
}

// ManifestCRC is the CRC-32C of the manifest in dir, as a child backup records it.
func ManifestCRC(dir string) (uint32, error) {
	_, crc, err := readManifest(dir)
	return crc, err
}

// ErrCorrupt is returned when a file does not match its manifest entry.
var ErrCorrupt = errors.New("backup: corrupt")

// ReadRange calls fn for every pair of e's data file in dir, in order, then checks the file's key count
// and CRC against e. fn's slices are only valid during the call. A mismatch returns ErrCorrupt — after
// fn has seen the pairs, so a caller that must not apply bad data checks with Verify first. A delta is
// refused: it means nothing without its chain (ReadRecords).
func ReadRange(dir string, e RangeEntry, fn func(key, value []byte) error) error {
	if e.Delta {
		return fmt.Errorf("backup: %s holds changes since a parent backup: restore its chain", e.File)
	}
	return ReadRecords(dir, e, func(k, v []byte, _ bool) error {
		if fn == nil {
			return nil
		}
		return fn(k, v)
	})
}

// ReadRecords is ReadRange for full and delta files alike: deleted says the record is a deletion.
func ReadRecords(dir string, e RangeEntry, fn func(key, value []byte, deleted bool) error) error {
	fr, err := openFile(filepath.Join(dir, e.File))
	if err != nil {
		return err
	}
	defer fr.close()
	var keys, deletes uint64
	var kbuf, vbuf []byte
	for {
		var deleted bool
		var ok bool
		kbuf, vbuf, deleted, ok, err = fr.record(kbuf, vbuf, e.Delta, nil)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, e.File, err)
		}
		if !ok {
			break
		}
		if deleted {
			deletes++
		} else {
			keys++
		}
		if fn != nil {
			if err := fn(kbuf, vbuf, deleted); err != nil {
				return err
			}
		}
	}
	if keys != e.Keys || deletes != e.Deletes || fr.r.crc != e.CRC32C || fr.r.n != e.Bytes {
		return fmt.Errorf("%w: %s has %d keys, %d deletions, %d bytes, crc %08x; manifest says %d, %d, %d, %08x",
			ErrCorrupt, e.File, keys, deletes, fr.r.n, fr.r.crc, e.Keys, e.Deletes, e.Bytes, e.CRC32C)
	}
	return nil
}

// Verify reads every file of m and checks it against the manifest.
func Verify(dir string, m *Manifest) error {
	for _, e := range m.Ranges {
		if err := ReadRecords(dir, e, nil); err != nil {
			return err
		}
	}
	if m.Index != nil {
		if err := ReadIndex(dir, *m.Index, nil); err != nil {
			return err
		}
	}
	return nil
}

// fileReader reads a checked file record by record.
type fileReader struct {
	f *os.File
	r *crcReader
}

func openFile(path string) (*fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup: open %s: %w", filepath.Base(path), err)
	}
	return &fileReader{f: f, r: &crcReader{r: bufio.NewReaderSize(f, 256<<10)}}, nil
}

func (fr *fileReader) close() { fr.f.Close() }

// record reads one record (ok false at a clean end of file): a key; with layer set (an intermediate
// run of a merge, always tagged) the index of the backup the record comes from; then a value —
// length-prefixed in a plain file, in a tagged one 0 for a deletion, else the length plus one.
func (fr *fileReader) record(kbuf, vbuf []byte, tagged bool, layer *int) (k, v []byte, deleted, ok bool, err error) {
	klen, err := binary.ReadUvarint(fr.r)
	if err == io.EOF {
		return kbuf, vbuf, false, false, nil
	}
	if err != nil {
		return kbuf, vbuf, false, false, err
	}
	if kbuf, err = readN(fr.r, kbuf, klen); err != nil {
		return kbuf, vbuf, false, false, err
	}
	if layer != nil {
		l, err := binary.ReadUvarint(fr.r)
		if err != nil {
			return kbuf, vbuf, false, false, unexpected(err)
		}
		*layer, tagged = int(l), true
	}
	vlen, err := binary.ReadUvarint(fr.r)
	if err != nil {
		return kbuf, vbuf, false, false, unexpected(err)
	}
	if tagged {
		if vlen == 0 {
			return kbuf, vbuf[:0], true, true, nil
		}
		vlen--
	}
	vbuf, err = readN(fr.r, vbuf, vlen)
	return kbuf, vbuf, false, err == nil, err
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

const maxRecord = 64 << 20

func readN(r io.Reader, buf []byte, n uint64) ([]byte, error) {
	if n > maxRecord {
		return nil, fmt.Errorf("record of %d bytes exceeds %d", n, maxRecord)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, unexpected(err)
}

// crcReader checksums and counts what is read through it.
type crcReader struct {
	r   *bufio.Reader
	crc uint32
	n   uint64
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.n += uint64(n)
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc = crc32.Update(c.crc, castagnoli, []byte{b})
		c.n++
	}
	return b, err
}
