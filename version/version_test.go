package version

import (
	"runtime/debug"
	"testing"
)

func TestCompute(t *testing.T) {
	bi := func(main string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			b := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: main}}
			for i := 0; i+1 < len(settings); i += 2 {
				b.Settings = append(b.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return b, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name   string
		linked string
		read   func() (*debug.BuildInfo, bool)
		want   Info
		str    string
	}{
		{"linked", "v1.2.3", bi("(devel)", "vcs.revision", "0123456789abcdef0123"), Info{"v1.2.3", "0123456789ab", "go1.99"}, "v1.2.3"},
		{"source tree", "", bi("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"),
			Info{"devel", "0123456789ab-dirty", "go1.99"}, "devel-0123456789ab-dirty"},
		{"go install", "", bi("v0.4.0"), Info{"v0.4.0", "", "go1.99"}, "v0.4.0"},
		{"nothing known", "", none, Info{Version: "devel"}, "devel"},
	} {
		got := compute(tc.linked, tc.read)
		if tc.read != nil && got.GoVersion == "" {
			t.Errorf("%s: no Go version", tc.name)
		}
		if tc.want.GoVersion == "" {
			tc.want.GoVersion = got.GoVersion // the running toolchain's
		}
		if got != tc.want || got.String() != tc.str {
			t.Errorf("%s: compute = %+v (%q), want %+v (%q)", tc.name, got, got.String(), tc.want, tc.str)
		}
	}
	if String() == "" {
		t.Error("String() is empty")
	}
}
