package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/security"
)

// TestLoggerJSON checks --log-format json: one JSON object per line with
// time, level, msg and the attributes, the level filter applied, and a
// password logged by mistake still redacted.
func TestLoggerJSON(t *testing.T) {
	var out testenv.SyncBuffer
	env := &Env{Out: &out, Err: &out}
	app := &cli.App{
		Flags: LogFlags("info"),
		Action: func(c *cli.Context) error {
			log, err := NewLogger(c, env)
			if err != nil {
				return err
			}
			log.Debug("hidden below info")
			log.Info("metrics listening", "addr", "127.0.0.1:9100")
			log.With("group", "topk-ingest").Warn("fetch error", "partition", int32(3), "password", security.Secret("hunter2"))
			return nil
		},
	}
	if err := app.Run([]string{"topk", "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (debug filtered):\n%s", len(lines), out.String())
	}
	var recs []map[string]any
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		if _, ok := rec["time"].(string); !ok {
			t.Errorf("line without a time: %s", l)
		}
		recs = append(recs, rec)
	}
	if recs[0]["level"] != "INFO" || recs[0]["msg"] != "metrics listening" || recs[0]["addr"] != "127.0.0.1:9100" {
		t.Errorf("first line %v", recs[0])
	}
	if recs[1]["level"] != "WARN" || recs[1]["group"] != "topk-ingest" || recs[1]["partition"] != float64(3) || recs[1]["password"] != security.Redacted {
		t.Errorf("second line %v", recs[1])
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("the password was logged:\n%s", out.String())
	}

	// The default stays text.
	out = testenv.SyncBuffer{}
	if err := app.Run([]string{"topk"}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `level=INFO msg="metrics listening" addr=127.0.0.1:9100`) {
		t.Errorf("text format line: %s", s)
	}
}
