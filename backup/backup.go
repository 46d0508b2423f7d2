// Package backup is the on-disk format of a Shoal backup: MANIFEST.json plus one file per range holding
// that range's user key/value pairs as length-prefixed records, each file checked by a CRC-32C and a
// key count recorded in the manifest.
//
// It owns writing and reading that format and nothing else: it never talks to a cluster or an engine.
// Package kv writes backups from a checkpoint of a node's engine (`shoal admin backup`); `shoal restore`
// reads them back into a cluster through the normal write path.
package backup

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Version of the format written by this package.
const Version = 1

// ManifestFile is the manifest's name inside a backup directory; it is written last, so a directory
// without it is an incomplete backup.
const ManifestFile = "MANIFEST.json"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes one backup.
type Manifest struct {
	Version   int       `json:"version"`
	ClusterID string    `json:"cluster_id"`
	NodeID    uint64    `json:"node_id"`
	CreatedAt time.Time `json:"created_at"`
	// DurationMS is how long the backup took, from the checkpoint to the manifest.
	DurationMS int64        `json:"duration_ms"`
	Ranges     []RangeEntry `json:"ranges"`
	TotalKeys  uint64       `json:"total_keys"`
	TotalBytes uint64       `json:"total_bytes"`
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
	CaughtUp bool   `json:"caught_up"`
	File     string `json:"file"`
	Keys     uint64 `json:"keys"`
	Bytes    uint64 `json:"bytes"`
	CRC32C   uint32 `json:"crc32c"`
}

// RangeFile is the name of a range's data file.
func RangeFile(rangeID uint64) string { return fmt.Sprintf("range-%d.kv", rangeID) }

// Writer writes one range's data file.
type Writer struct {
	f     *os.File
	w     *bufio.Writer
	crc   uint32
	keys  uint64
	bytes uint64
	buf   [binary.MaxVarintLen64]byte
}

// Create starts the data file of rangeID in dir (which must exist).
func Create(dir string, rangeID uint64) (*Writer, error) {
	f, err := os.OpenFile(filepath.Join(dir, RangeFile(rangeID)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("backup: create range file: %w", err)
	}
	return &Writer{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (w *Writer) put(p []byte) error {
	w.crc = crc32.Update(w.crc, castagnoli, p)
	w.bytes += uint64(len(p))
	_, err := w.w.Write(p)
	return err
}

// Add appends one key/value pair.
func (w *Writer) Add(key, value []byte) error {
	for _, p := range [][]byte{key, value} {
		n := binary.PutUvarint(w.buf[:], uint64(len(p)))
		if err := w.put(w.buf[:n]); err != nil {
			return fmt.Errorf("backup: write: %w", err)
		}
		if err := w.put(p); err != nil {
			return fmt.Errorf("backup: write: %w", err)
		}
	}
	w.keys++
	return nil
}

// Bytes is the number of bytes written so far.
func (w *Writer) Bytes() uint64 { return w.bytes }

// Close flushes and syncs the file and fills e's file, count and checksum fields.
func (w *Writer) Close(e *RangeEntry) error {
	err := w.w.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: close range file: %w", err)
	}
	e.File, e.Keys, e.Bytes, e.CRC32C = filepath.Base(w.f.Name()), w.keys, w.bytes, w.crc
	return nil
}

// WriteManifest writes m as the backup's manifest, durably (temp file, sync, rename).
func WriteManifest(dir string, m *Manifest) error {
	m.Version = Version
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
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrIncomplete, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("backup: read manifest: %w", err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("backup: manifest of %s is corrupt: %w", dir, err)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("backup: manifest version %d, this binary reads version %d", m.Version, Version)
	}
	return m, nil
}

// ErrCorrupt is returned when a range file does not match its manifest entry.
var ErrCorrupt = errors.New("backup: range file corrupt")

// ReadRange calls fn for every pair of e's data file in dir, in order, then checks the file's key count
// and CRC against e. fn's slices are only valid during the call. A mismatch returns ErrCorrupt — after
// fn has seen the pairs, so a caller that must not apply bad data checks with Verify first.
func ReadRange(dir string, e RangeEntry, fn func(key, value []byte) error) error {
	f, err := os.Open(filepath.Join(dir, e.File))
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", e.File, err)
	}
	defer f.Close()
	r := &crcReader{r: bufio.NewReaderSize(f, 256<<10)}
	var keys uint64
	var kbuf, vbuf []byte
	for {
		klen, err := binary.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, e.File, err)
		}
		if kbuf, err = readN(r, kbuf, klen); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, e.File, err)
		}
		vlen, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, e.File, err)
		}
		if vbuf, err = readN(r, vbuf, vlen); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, e.File, err)
		}
		keys++
		if fn != nil {
			if err := fn(kbuf, vbuf); err != nil {
				return err
			}
		}
	}
	if keys != e.Keys || r.crc != e.CRC32C || r.n != e.Bytes {
		return fmt.Errorf("%w: %s has %d keys, %d bytes, crc %08x; manifest says %d, %d, %08x", ErrCorrupt, e.File,
			keys, r.n, r.crc, e.Keys, e.Bytes, e.CRC32C)
	}
	return nil
}

// Verify reads every range file of m and checks it against the manifest.
func Verify(dir string, m *Manifest) error {
	for _, e := range m.Ranges {
		if err := ReadRange(dir, e, nil); err != nil {
			return err
		}
	}
	return nil
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
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return buf, err
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
