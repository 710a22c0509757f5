package lua

import (
	"strings"
	"testing"
)

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

// TestFencedScriptsShareTheProtocol: the three fenced scripts take
// fence.lua's one copy of the protocol in place of their include line, and
// no script is left with an include line or a copy of its own; nor with a
// second copy of bulk.lua's or cand.lua's helper.
func TestFencedScriptsShareTheProtocol(t *testing.T) {
	fenced := map[*Script]bool{Ingest: true, GlobalAdd: true, Activity: true}
	for _, s := range All() {
		if strings.Contains(s.Source, "\n-- #include ") {
			t.Errorf("%s: an include line is left", s.Name)
		}
		if got := strings.Count(s.Source, "local function judge("); got != map[bool]int{true: 1}[fenced[s]] {
			t.Errorf("%s: %d copies of judge", s.Name, got)
		}
		for _, helper := range []string{"bulk", "trim", "ranks", "keep_for"} {
			if got := strings.Count(s.Source, "local function "+helper+"("); got > 1 {
				t.Errorf("%s: %d copies of %s", s.Name, got, helper)
			}
		}
		if fenced[s] && !strings.HasPrefix(s.Source, "#!lua\n") {
			t.Errorf("%s: the shebang line is no longer first", s.Name)
		}
	}
}

func TestIncludeRefusesAnUnknownLibrary(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a library that does not exist")
		}
	}()
	include("x", "#!lua\n-- #include nope.lua\nreturn 1")
}
