// Package version says which build of Shoal is running: the release set at link time, or else what the
// Go toolchain recorded about the source (module version, VCS revision, uncommitted changes). It is a
// leaf: it imports nothing of Shoal and never fails.
//
// A release build sets the version with
//
//	go build -ldflags "-X github.com/shoaldb/shoal/version.Version=v1.2.3" ./cmd/shoal
package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is the release this binary was built as; empty unless set with -ldflags -X (see the package
// comment).
var Version string

// Info is what is known about this build.
type Info struct {
	// Version is the release (from -ldflags), the module version recorded by `go install pkg@version`,
	// or "devel" for a build from a source tree.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from (empty when not recorded), with "-dirty"
	// appended when the tree had uncommitted changes.
	Revision string `json:"revision"`
	// GoVersion is the Go toolchain that built the binary, e.g. "go1.26.0".
	GoVersion string `json:"go"`
}

var (
	once sync.Once
	info Info
)

// Get returns what is known about this build (computed once).
func Get() Info {
	once.Do(func() { info = compute(Version, readBuildInfo) })
	return info
}

// String is the version in one word: the release, or "devel-<revision>" for a build from a source
// tree (just "devel" when the revision is unknown).
func String() string { return Get().String() }

// String renders i as String does.
func (i Info) String() string {
	if i.Version != "devel" || i.Revision == "" {
		return i.Version
	}
	return "devel-" + i.Revision
}

func readBuildInfo() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

// compute derives Info from the link-time version and the toolchain's build information.
func compute(linked string, read func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: linked, GoVersion: runtime.Version()}
	bi, ok := read()
	if ok {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && dirty {
			rev += "-dirty"
		}
		i.Revision = rev
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}
