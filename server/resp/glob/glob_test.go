package glob

import "testing"

func TestGlob(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*", "bac", false},
		{"*c", "abc", true}, {"a*c", "ac", true}, {"a*c", "abcd", false}, {"h?llo", "hello", true},
		{"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true}, {`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false},
		{"**a**b**", "xxaxxbxx", true}, {"user:*:name", "user:42:name", true}, {"[\\]]", "]", true},
		{"a*b*c*d*e*f*g*h*i*j*k", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"[abc", "b", true}, {"?", "", false}, {"", "", true}, {"", "a", false},
	}
	for _, tc := range cases {
		if got := Match([]byte(tc.p), []byte(tc.s)); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}
