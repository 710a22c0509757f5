package lua

import "testing"

// TestReadOnlyScripts: a script is run with EVALSHA_RO exactly when its
// shebang line flags it no-writes; activity_count.lua, which the API's
// read-only Redis user runs, is one.
func TestReadOnlyScripts(t *testing.T) {
	for src, want := range map[string]bool{
		"#!lua flags=no-writes\nreturn 1":             true,
		"#!lua flags=allow-stale,no-writes\nreturn 1": true,
		"#!lua name=x flags=no-writes\nreturn 1":      true,
		"#!lua\nreturn 1":                             false,
		"#!lua flags=allow-oom\nreturn 1":             false,
		"-- flags=no-writes\nreturn 1":                false,
		"return 1 -- #!lua flags=no-writes":           false,
	} {
		if got := noWrites(src); got != want {
			t.Errorf("%q: no-writes %v, want %v", src, got, want)
		}
	}
	if !ActivityCount.ReadOnly {
		t.Error("activity_count.lua is not run read-only")
	}
}
