package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestProduceProgress: `topk produce` and `topk activity produce` print
// their result on stdout only and their progress on stderr, which is not a
// terminal here, so plain lines without "\r" or escape codes, ending with
// the final line: the count against the known total (--count) and the
// average rate.
func TestProduceProgress(t *testing.T) {
	k := testenv.Kafka(t, map[string]int32{"topk.events": 2, "topk.activity": 2})
	brokers := strings.Join(k.ListenAddrs(), ",")
	for _, tc := range []struct {
		args  []string
		out   string
		label string
	}{
		{[]string{"produce", "--count", "2000", "--rate", "0"}, `^produced 2000 events \(2000 acknowledged, 0 failed\) in \S+\n$`, "produce"},
		{[]string{"activity", "produce", "--count", "2000", "--activity-rate", "0"}, `^produced 2000 activity events \(2000 acknowledged\) in \S+\n$`, "activity produce"},
	} {
		out, errOut, err := runCLI(t, append(tc.args, "--brokers", brokers)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, errOut)
		}
		if !regexp.MustCompile(tc.out).MatchString(out) {
			t.Errorf("%v: stdout %q", tc.args, out)
		}
		if strings.ContainsAny(errOut, "\r\x1b") {
			t.Errorf("%v: stderr is not a terminal but has terminal controls: %q", tc.args, errOut)
		}
		final := regexp.MustCompile(`(?m)^` + tc.label + `: 2,000 events acked, [0-9,]+/s, 100% of 2,000, done in \S+\n\z`)
		if !final.MatchString(errOut) {
			t.Errorf("%v: stderr does not end with the final progress line:\n%s", tc.args, errOut)
		}
	}
}
