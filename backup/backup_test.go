package backup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{ClusterID: "c1", NodeID: 2, CreatedAt: time.Unix(100, 0).UTC()}
	want := map[uint64][][2]string{
		5: {{"a", "1"}, {"b", ""}, {"c", string(bytes.Repeat([]byte("v"), 300))}},
		7: {},
	}
	for _, id := range []uint64{5, 7} {
		w, err := Create(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range want[id] {
			if err := w.Add([]byte(kv[0]), []byte(kv[1])); err != nil {
				t.Fatal(err)
			}
		}
		e := RangeEntry{RangeID: id, StartKey: []byte("a"), Generation: 3}
		if err := w.Close(&e); err != nil {
			t.Fatal(err)
		}
		m.Ranges = append(m.Ranges, e)
	}
	if _, err := ReadManifest(dir); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("a backup without its manifest must read as incomplete, got %v", err)
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ranges) != 2 || got.Ranges[0].Keys != 3 || got.Ranges[1].Keys != 0 || got.NodeID != 2 {
		t.Fatalf("manifest %+v", got)
	}
	if err := Verify(dir, got); err != nil {
		t.Fatal(err)
	}
	var read [][2]string
	if err := ReadRange(dir, got.Ranges[0], func(k, v []byte) error {
		read = append(read, [2]string{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(read) != fmt.Sprint(want[5]) {
		t.Fatalf("read %q, want %q", read, want[5])
	}
}

func TestCorruptionDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string)
	}{
		{"bit flip", func(p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}},
		{"truncated", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-3], 0o644)
		}},
		{"record appended", func(p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{1, 'x', 1, 'y'})
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				w.Add(fmt.Appendf(nil, "key%03d", i), bytes.Repeat([]byte{byte(i)}, 20))
			}
			e := RangeEntry{RangeID: 1}
			if err := w.Close(&e); err != nil {
				t.Fatal(err)
			}
			tc.damage(filepath.Join(dir, e.File))
			if err := Verify(dir, &Manifest{Ranges: []RangeEntry{e}}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damage not detected: %v", err)
			}
		})
	}
}
