package keys_test

import (
	"testing"

	"github.com/topk-dev/topk/pkg/keys"
)

// TestUsersKey pins the unique-user key names (a public contract, as the
// other keys) and checks they carry the workspace's hash tag whatever the
// channel id holds.
func TestUsersKey(t *testing.T) {
	for _, tt := range []struct{ prefix, ws, ch, want string }{
		{"", "w1", "general", "topk:{w:w1}:u:29574613:general"},
		{"app1:topk", "w1", "c:1", "app1:topk:{w:w1}:u:29574613:c:1"},
		{"topk", "a}b%c", "x}{y}", "topk:{w:a%7Db%25c}:u:29574613:x}{y}"},
	} {
		w := keys.New(tt.prefix).Workspace(tt.ws)
		got := w.Users(29574613, tt.ch)
		if got != tt.want {
			t.Errorf("Users(29574613, %q) of %q = %q, want %q", tt.ch, tt.ws, got, tt.want)
		}
		if tag, want := hashTag(got), hashTag(w.Win(keys.Window1h)); tag != want {
			t.Errorf("hash tag of %q = %q, want the workspace's %q", got, tag, want)
		}
	}
}
