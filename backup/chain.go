package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/plan/mergeplan"
)

// ErrBrokenChain is returned when a backup's parent is missing or is not the backup it was taken
// against.
var ErrBrokenChain = errors.New("backup chain broken")

// maxChain bounds a chain's length (and so a cycle of links).
const maxChain = 10_000

// Link is one backup of a chain.
type Link struct {
	Dir      string
	Manifest *Manifest
}

// Chain is a full backup followed by the incremental backups taken against it, oldest first; its
// newest link implies the whole state.
type Chain struct {
	Links []Link
}

// Newest is the backup the chain was opened from.
func (c *Chain) Newest() Link { return c.Links[len(c.Links)-1] }

// OpenChain follows the parent links from the backup in dir back to a full backup and checks every
// link: the parent is found at the directory recorded when the child was taken or, if the chain was
// moved, beside the child under the same name; its id and the checksum of its manifest are the ones
// the child recorded. It reads manifests only; Verify reads the data.
func OpenChain(dir string) (*Chain, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	links := []Link{{Dir: dir, Manifest: m}}
	seen := map[string]bool{m.ID: true}
	for m.Parent != nil {
		if len(links) >= maxChain {
			return nil, fmt.Errorf("%w: more than %d links from %s", ErrBrokenChain, maxChain, dir)
		}
		child := links[len(links)-1].Dir
		pdir, pm, err := findParent(child, m.Parent)
		if err != nil {
			return nil, err
		}
		if seen[pm.ID] {
			return nil, fmt.Errorf("%w: %s links back to itself", ErrBrokenChain, pdir)
		}
		seen[pm.ID] = true
		links = append(links, Link{Dir: pdir, Manifest: pm})
		m = pm
	}
	for _, e := range m.Ranges {
		if e.Delta {
			return nil, fmt.Errorf("%w: %s has no parent but range %d holds changes only", ErrBrokenChain, links[len(links)-1].Dir, e.RangeID)
		}
	}
	slices.Reverse(links)
	return &Chain{Links: links}, nil
}

// findParent finds the parent p of the backup in child.
func findParent(child string, p *Parent) (string, *Manifest, error) {
	candidates := []string{}
	if filepath.IsAbs(p.Dir) {
		candidates = append(candidates, p.Dir)
	}
	if beside := filepath.Join(filepath.Dir(child), filepath.Base(p.Dir)); beside != p.Dir {
		candidates = append(candidates, beside)
	}
	var problems []string
	for _, dir := range candidates {
		m, crc, err := readManifest(dir)
		switch {
		case errors.Is(err, ErrIncomplete):
			if _, serr := os.Stat(dir); serr == nil {
				problems = append(problems, fmt.Sprintf("%s has no manifest", dir))
			}
			continue
		case err != nil:
			problems = append(problems, err.Error())
			continue
		case m.ID != p.ID:
			problems = append(problems, fmt.Sprintf("%s is backup %s, not %s", dir, m.ID, p.ID))
			continue
		case crc != p.ManifestCRC32C:
			problems = append(problems, fmt.Sprintf("the manifest of %s changed after %s was taken against it (crc %08x, recorded %08x)",
				dir, child, crc, p.ManifestCRC32C))
			continue
		}
		return dir, m, nil
	}
	if len(problems) == 0 {
		problems = append(problems, "not found at "+strings.Join(candidates, " nor at "))
	}
	return "", nil, fmt.Errorf("%w: parent %s of %s: %s", ErrBrokenChain, p.ID, child, strings.Join(problems, "; "))
}

// Verify reads every file of every link and checks it against its manifest. With collect, it also
// returns the hashes of each link's keys (puts and deletions), the runs the merge planner weighs.
func (c *Chain) Verify(collect bool) ([]mergeplan.Set, error) {
	sets := make([]mergeplan.Set, len(c.Links))
	for i, l := range c.Links {
		var hashes []uint64
		for _, e := range l.Manifest.Ranges {
			var fn func(k, v []byte, deleted bool) error
			if collect {
				fn = func(k, _ []byte, _ bool) error {
					hashes = append(hashes, mergeplan.HashKey(k))
					return nil
				}
			}
			if err := ReadRecords(l.Dir, e, fn); err != nil {
				return nil, fmt.Errorf("%s: %w", l.Dir, err)
			}
		}
		if l.Manifest.Index != nil {
			if err := ReadIndex(l.Dir, *l.Manifest.Index, nil); err != nil {
				return nil, fmt.Errorf("%s: %w", l.Dir, err)
			}
		}
		if collect {
			sets[i] = mergeplan.Keys(hashes...)
		}
	}
	if !collect {
		return nil, nil
	}
	return sets, nil
}

// Listed is one backup found by List.
type Listed struct {
	Dir       string    `json:"dir"`
	ID        string    `json:"id,omitempty"`
	Kind      string    `json:"kind"`             // full, incremental, incomplete, unreadable
	Method    string    `json:"method,omitempty"` // an incremental's: journal or diff (Manifest.Method)
	Parent    string    `json:"parent,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Ranges    int       `json:"ranges"`
	Keys      uint64    `json:"keys"`
	Deletes   uint64    `json:"deletes"`
	Bytes     uint64    `json:"bytes"`
	// Chain is the number of links from this backup back to its full backup (0: the chain is broken).
	Chain int    `json:"chain"`
	Err   string `json:"error,omitempty"`
}

// List describes the backups in dir and its subdirectories (one level), oldest first (interrupted ones
// last), each with the length of its chain or why it cannot be restored. It reads manifests only.
func List(dir string) ([]Listed, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: list %s: %w", dir, err)
	}
	dirs := []string{dir}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	var out []Listed
	for _, d := range dirs {
		m, err := ReadManifest(d)
		if errors.Is(err, ErrIncomplete) {
			if hasBackupFiles(d) {
				out = append(out, Listed{Dir: d, Kind: "incomplete", Err: "interrupted: no manifest"})
			}
			continue
		}
		if err != nil {
			out = append(out, Listed{Dir: d, Kind: "unreadable", Err: err.Error()})
			continue
		}
		l := Listed{Dir: d, ID: m.ID, Kind: "full", CreatedAt: m.CreatedAt, Ranges: len(m.Ranges), Keys: m.TotalKeys,
			Deletes: m.TotalDeletes, Bytes: m.TotalBytes}
		if m.Parent != nil {
			l.Kind, l.Parent, l.Method = "incremental", m.Parent.ID, m.Method
		}
		if c, err := OpenChain(d); err != nil {
			l.Err = err.Error()
		} else {
			l.Chain = len(c.Links)
		}
		out = append(out, l)
	}
	// Oldest first; interrupted backups (no time) last.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].CreatedAt, out[j].CreatedAt
		return !a.IsZero() && (b.IsZero() || a.Before(b))
	})
	return out, nil
}

// hasBackupFiles says whether dir holds files a backup writes (an interrupted one has no manifest).
func hasBackupFiles(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "range-*.kv"))
	return len(files) > 0
}
