package cli_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/activityingest"
	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/ingest"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestBatchEventsDefaults: the channel pipeline's commands batch up to
// ingest.DefaultBatchEvents records, which pre-aggregates a backlog into
// fewer pairs; the activity consumers keep their smaller default, since the
// raw archive holds a batch's every event in memory.
func TestBatchEventsDefaults(t *testing.T) {
	if ingest.DefaultBatchEvents <= activityingest.DefaultBatchEvents {
		t.Fatalf("the channel pipeline's default %d is not above the activity consumers' %d",
			ingest.DefaultBatchEvents, activityingest.DefaultBatchEvents)
	}
	var out bytes.Buffer
	app := cli.App(cli.Env{Out: &out, Err: &out})
	for _, c := range []struct {
		path []string
		want int
	}{
		{[]string{"ingest"}, ingest.DefaultBatchEvents},
		{[]string{"run"}, ingest.DefaultBatchEvents},
		{[]string{"activity", "ingest"}, activityingest.DefaultBatchEvents},
		{[]string{"activity", "archive"}, activityingest.DefaultBatchEvents},
	} {
		cmd := app.Command(c.path[0])
		for _, sub := range c.path[1:] {
			cmd = cmd.Command(sub)
		}
		if cmd == nil {
			t.Fatalf("no command topk %s", strings.Join(c.path, " "))
		}
		got := -1
		for _, f := range cmd.Flags {
			if f.Names()[0] == "batch-events" {
				if g, ok := f.(interface{ GetValue() string }); ok {
					got, _ = strconv.Atoi(g.GetValue())
				}
			}
		}
		if got != c.want {
			t.Errorf("topk %s --batch-events defaults to %d, want %d", strings.Join(c.path, " "), got, c.want)
		}
	}
}

// TestBatchEventsAtLeastOne: a batch of no records is a usage error, not a
// silent fall back to a default (ingest.Config takes 0 for "the channel
// pipeline's", which an activity consumer must not get).
func TestBatchEventsAtLeastOne(t *testing.T) {
	r := testenv.Redis(t)
	for _, cmd := range [][]string{{"ingest"}, {"activity", "ingest"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append(cmd, "--redis", r.Addr(), "--brokers", "127.0.0.1:1", "--batch-events", "0")...)
			if code := exitCode(t, err); code != 2 || !strings.Contains(err.Error(), "--batch-events must be at least 1") {
				t.Fatalf("exit %d (%v), want 2 naming --batch-events", code, err)
			}
		})
	}
}
