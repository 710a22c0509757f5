package userwords

import (
	"os"
	"slices"
	"testing"
)

// TestOf: topk's operation prefixes leave a message, at its start and
// before a cause; other words ending with a colon stay.
func TestOf(t *testing.T) {
	for in, want := range map[string]string{
		"store.read_top: dial tcp 127.0.0.1:1: connect: connection refused":         "dial tcp 127.0.0.1:1: connect: connection refused",
		"cannot read the raw event store: rawstore.List: timeout: context deadline": "cannot read the raw event store: timeout: context deadline",
		"usercount: range must be whole minutes":                                    "range must be whole minutes",
		"geo.bbox: geo: box too large":                                              "box too large",
		"denied: user-1 has 5 events":                                               "denied: user-1 has 5 events",
		"the raw event store: no such user":                                         "the raw event store: no such user",
		"unknown window: want 1h":                                                   "unknown window: want 1h",
		"kafka.ensure_topics topk.events: unable to dial: dial tcp":                 "unable to dial: dial tcp",
		"failed to connect to `user=u database=x`:\n\t127.0.0.1:1 (127.0.0.1): dial error\n\t127.0.0.1:1 (127.0.0.1): dial error": "failed to connect to `user=u database=x`: 127.0.0.1:1 (127.0.0.1): dial error",
	} {
		if got := Of(in); got != want {
			t.Errorf("Of(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPackages: packages lists the packages under pkg/.
func TestPackages(t *testing.T) {
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if !slices.Equal(dirs, packages) {
		t.Errorf("pkg/ holds %v; packages is %v", dirs, packages)
	}
}
