package keys_test

import (
	"testing"

	"github.com/topk-dev/topk/pkg/keys"
)

func TestParseGlobalItem(t *testing.T) {
	for _, tc := range [][2]string{
		{"acme", "general"}, {"a/b", "c/d"}, {"50%", "x%y"}, {"", ""}, {"a}b", "c-a"}, {"\x00\n", "\x7f/"},
	} {
		item := keys.GlobalItem(tc[0], tc[1])
		ws, ch, err := keys.ParseGlobalItem(item)
		if err != nil || ws != tc[0] || ch != tc[1] {
			t.Errorf("ParseGlobalItem(%q) = %q, %q, %v; want %q, %q", item, ws, ch, err, tc[0], tc[1])
		}
	}
	for _, bad := range []string{"nochannel", "a%2", "a%zz/c", "a%2f/c", "a%41/c", "a/b%", "a\n/c"} {
		if ws, ch, err := keys.ParseGlobalItem(bad); err == nil {
			t.Errorf("ParseGlobalItem(%q) = %q, %q, want an error", bad, ws, ch)
		}
	}
}

// BenchmarkGlobalItem: a worker encodes an id for every count its global
// hold writes. Run: go test -run '^$' -bench GlobalItem ./pkg/keys/
func BenchmarkGlobalItem(b *testing.B) {
	for range b.N {
		_ = keys.GlobalItem("workspace-000123", "channel-0004567")
	}
}
