package cli_test

import (
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestFreshEveryRejected: a --fresh-every that is not positive stops
// schedule before it starts (exit 2, naming the flag) instead of falling
// back to the default unannounced.
func TestFreshEveryRejected(t *testing.T) {
	r := testenv.Redis(t)
	for _, v := range []string{"0s", "-5s"} {
		t.Run(v, func(t *testing.T) {
			_, _, err := runCLI(t, "schedule", "--redis", r.Addr(), "--fresh-every", v)
			if code := exitCode(t, err); code != 2 {
				t.Fatalf("exit %d (%v), want 2", code, err)
			}
			if !strings.Contains(err.Error(), "--fresh-every") {
				t.Errorf("error %q does not name --fresh-every", err)
			}
		})
	}
}
