package cli

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/ingest"
)

// TestActivityBatchEvents: run's activity workers keep the activity
// consumers' batch size unless --batch-events is set, which then sizes
// them as it does the channel workers.
func TestActivityBatchEvents(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, activityingest.DefaultBatchEvents},
		{[]string{"--batch-events", "5000"}, 5000},
		{[]string{"--batch-events", "1000000"}, 1_000_000},
	} {
		got := -1
		app := &cli.App{Flags: ingestFlags(DefaultGroup, "", ingest.DefaultBatchEvents),
			Action: func(c *cli.Context) error { got = activityBatchEvents(c); return nil }}
		if err := app.Run(append([]string{"topk"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%v: activity workers batch %d records, want %d", c.args, got, c.want)
		}
	}
}
