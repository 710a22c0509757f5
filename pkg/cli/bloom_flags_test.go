package cli_test

import (
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestBloomFlagsRejected: the RedisBloom TOPK's width, depth and decay are
// checked before a command starts (exit 2, naming the flag); RedisBloom
// would refuse them at the first TOPK.RESERVE, in every flush.
func TestBloomFlagsRejected(t *testing.T) {
	r := testenv.Redis(t)
	for _, args := range [][]string{
		{"--bloom-width", "-1"},
		{"--bloom-depth", "-3"},
		{"--bloom-decay", "0"},
		{"--bloom-decay", "1"},
		{"--bloom-decay", "1.5"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"schedule", "--redis", r.Addr(), "--global-backend", "redisbloom"}, args...)...)
			if code := exitCode(t, err); code != 2 {
				t.Fatalf("exit %d (%v), want 2", code, err)
			}
			if !strings.Contains(err.Error(), args[0]) {
				t.Errorf("error %q does not name %s", err, args[0])
			}
		})
	}
}
