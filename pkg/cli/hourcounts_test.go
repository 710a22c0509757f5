package cli_test

import (
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// --hour-counts takes redis or worker; worker needs a ranking of at least
// one entry and held minute buckets.
func TestHourCountsFlag(t *testing.T) {
	r := testenv.Redis(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "--redis", r.Addr(), "--hour-counts", "bogus"}, `--hour-counts "bogus": want redis or worker`},
		{[]string{"ingest", "--redis", r.Addr(), "--brokers", "127.0.0.1:1", "--hour-counts", "worker", "--k", "0"}, "at least 1 entry"},
		{[]string{"ingest", "--redis", r.Addr(), "--brokers", "127.0.0.1:1", "--hour-counts", "worker", "--bucket-age", "-1s"}, "--hour-counts worker needs the minute buckets held"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if code := exitCode(t, err); code != cli.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("topk %s: exit %d, %v; want exit %d saying %q", strings.Join(tc.args, " "), code, err, cli.ExitUsage, tc.want)
		}
	}
}
