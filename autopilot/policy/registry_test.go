package policy

import "testing"

// TestDefaultSwitches checks that the standard registry builds each policy under its own name and
// starts with each switch at DefaultOn, which is what nodes fall back to when no switch is stored.
func TestDefaultSwitches(t *testing.T) {
	r := Default(Config{})
	list := r.List()
	if len(list) != len(builtins) {
		t.Fatalf("registry has %d policies, builtins %d", len(list), len(builtins))
	}
	for i, st := range list {
		if st.Name != builtins[i].name {
			t.Errorf("policy %d is %q, built as %q", i, st.Name, builtins[i].name)
		}
		if st.On != DefaultOn(st.Name) {
			t.Errorf("%s starts %v, DefaultOn says %v", st.Name, st.On, DefaultOn(st.Name))
		}
	}
	if DefaultOn("autoscale") {
		t.Error("an unknown policy is on by default")
	}
}
