package node

import (
	"strings"
	"testing"
)

func TestLocalityValidation(t *testing.T) {
	for _, tc := range []struct {
		locality string
		ok       bool
	}{
		{"", true},
		{"zone=a", true},
		{"region=eu,zone=eu-1a", true},
		{"eu", false},
		{"region=,zone=a", false},
		{"region=eu,", false},
	} {
		err := Config{DataDir: "/tmp/x", Locality: tc.locality}.Validate()
		if ok := err == nil || !strings.Contains(err.Error(), "locality"); ok != tc.ok {
			t.Errorf("locality %q: %v, want ok=%v", tc.locality, err, tc.ok)
		}
	}
}
