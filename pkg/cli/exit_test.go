package cli_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// TestExitCodes runs the app with bad inputs and checks the README's table
// of exit statuses (0 success, 1 failure, 2 bad usage, 3 no such result or
// denied, 4 refused by Redis: TestACLRefusalsSaySo and
// TestRedisAuthFailures check 4), and that a usage error is one short line
// saying what was wrong and where the help is, not the whole help.
func TestExitCodes(t *testing.T) {
	r := testenv.Redis(t)
	const unreachable = "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		code int
		says string // in the error
	}{
		// Unknown commands, also after help and in a group.
		{[]string{"nosuchcmd"}, 2, `unknown command "nosuchcmd" (see topk --help)`},
		{[]string{"help", "nosuchcmd"}, 2, `unknown command "nosuchcmd"`},
		{[]string{"activity", "nosuch"}, 2, `unknown command "activity nosuch" (see topk activity --help)`},
		{[]string{"scripts", "help", "nosuch"}, 2, `unknown command "scripts nosuch"`},
		// Flags: unknown, without a value, not parsing, out of range.
		{[]string{"--bogus"}, 2, "unknown flag --bogus (see topk --help)"},
		{[]string{"get", "--bogus"}, 2, "unknown flag --bogus (see topk get --help)"},
		{[]string{"get", "--k", "abc"}, 2, `--k: "abc" is not a whole number (see topk get --help)`},
		{[]string{"get", "--k"}, 2, "--k needs a value"},
		{[]string{"get", "--k", "99999999999999999999"}, 2, "out of range"},
		{[]string{"get", "--json=maybe", "-w", "x"}, 2, `--json: "maybe" is not true or false`},
		{[]string{"doctor", "--timeout", "soon"}, 2, `--timeout: "soon" is not a duration`},
		{[]string{"activity", "check", "--user", "u", "--limit", "x"}, 2, `--limit: "x" is not a whole number`},
		{[]string{"activity", "count", "--user", "u", "--from", "yesterday", "--to", "1774346400000"}, 2, `--from: "yesterday" is neither RFC 3339 nor unix milliseconds`},
		{[]string{"activity", "list", "--user", "u", "--to", "2026-03-24 10:00"}, 2, `--to: "2026-03-24 10:00" is neither RFC 3339 nor unix milliseconds`},
		// Required flags, and values the command itself refuses, before
		// any backend is dialled (Redis is unreachable here).
		{[]string{"activity", "count"}, 2, "--user is required (see topk activity count --help)"},
		{[]string{"activity", "check", "--user", "u"}, 2, "--limit is required"},
		{[]string{"activity", "list", "--postgres", "postgres://x"}, 2, "--user is required"},
		{[]string{"activity", "count", "--redis", unreachable, "--user", "u", "--window", "2h"}, 2, `unknown --window "2h": want 1m, 1h or 24h`},
		{[]string{"activity", "count", "--redis", unreachable, "--user", "u", "--window", "1h", "--to", "1774346400000"}, 2, "give --window, or --from and --to"},
		{[]string{"activity", "count", "--redis", unreachable, "--user", "u", "--from", "1774346400001", "--to", "1774346460000"}, 2, "must be whole minutes"},
		{[]string{"activity", "count", "--redis", unreachable, "--user", "u", "--window", "1h", "--type", "Bad:Type"}, 2, `--type: type "Bad:Type" has byte 'B' outside [a-z0-9_.-]`},
		{[]string{"activity", "check", "--redis", unreachable, "--user", "u", "--limit", "0"}, 2, "--limit must be at least 1, got 0"},
		{[]string{"activity", "list", "--postgres", "postgres://127.0.0.1:1/x", "--user", "u", "--limit", "0"}, 2, "--limit must be from 1 to 1000, got 0"},
		{[]string{"activity", "delete", "--redis", unreachable, "--postgres", "postgres://127.0.0.1:1/x", "--user", "a\tb"}, 2, "no user can have this --user: user_id \"a\\tb\" has control character U+0009"},
		{[]string{"get", "--redis", unreachable}, 2, "give either --workspace W or --global"},
		{[]string{"ingest", "--redis", unreachable, "--brokers", unreachable, "--max-pairs-per-call", "0"}, 2, "--max-pairs-per-call must be at least 1, got 0"},
		{[]string{"get", "--redis", unreachable, "-w", "x", "--window", "2h"}, 2, `unknown --window "2h"`},
		{[]string{"get", "--config", "/nonexistent/topk.yaml", "-w", "x"}, 2, "cannot read the --config file"},
		// Failures: the backend is unreachable.
		{[]string{"get", "--redis", unreachable, "-w", "x"}, 1, "cannot reach Redis at " + unreachable},
		{[]string{"activity", "count", "--redis", unreachable, "--user", "u", "--window", "1h"}, 1, "cannot reach Redis at " + unreachable},
		// pgx's error spans a line per address tried: one line here.
		{[]string{"activity", "list", "--postgres", "postgres://nobody@" + unreachable + "/x", "--user", "u"}, 1, "cannot reach the raw event store (PostgreSQL, --postgres): failed to connect"},
		{[]string{"produce", "--brokers", unreachable, "--count", "1"}, 1, "cannot create or find topic topk.events on Kafka at " + unreachable + ": unable to dial"},
		// No such result.
		{[]string{"get", "--redis", r.Addr(), "-w", "x"}, 3, `workspace "x" has no ranking over the last hour yet`},
		// Success, and help, which is not an error.
		{[]string{"scripts", "list"}, 0, ""},
		{[]string{"help", "get"}, 0, ""},
		{[]string{"get", "--help"}, 0, ""},
	} {
		name := strings.Join(tc.args, " ")
		out, errOut, err := runCLI(t, tc.args...)
		if code := cli.ExitStatus(err); code != tc.code {
			t.Errorf("topk %s: exit %d (%v), want %d", name, code, err, tc.code)
			continue
		}
		if err == nil {
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.says) {
			t.Errorf("topk %s: error %q does not say %q", name, msg, tc.says)
		}
		if strings.Contains(msg, "\n") || len(msg) > 200 {
			t.Errorf("topk %s: error is not one short line: %q", name, msg)
		}
		if tc.code == 2 && (out != "" || errOut != "") {
			t.Errorf("topk %s: a usage error printed more than its message:\nstdout:\n%s\nstderr:\n%s", name, out, errOut)
		}
		for _, internal := range []string{"Incorrect Usage", "No help topic", "flag provided", "parse error", "inner error", "kafka.", "rawstore", "store.", "map["} {
			if strings.Contains(msg, internal) {
				t.Errorf("topk %s: error %q shows urfave/cli's or Go's own wording %q", name, msg, internal)
			}
		}
	}
}

// TestExitStatus: what main exits with.
func TestExitStatus(t *testing.T) {
	if got := cli.ExitStatus(nil); got != 0 {
		t.Errorf("ExitStatus(nil) = %d", got)
	}
	if got := cli.ExitStatus(errors.New("plain")); got != 1 {
		t.Errorf("ExitStatus(plain error) = %d, want 1", got)
	}
}

// TestActivityHelpDefaults: the help shows the defaults the commands use,
// and none they refuse.
func TestActivityHelpDefaults(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		has, hasNo string
	}{
		{[]string{"activity", "archive", "--help"}, `dead-letter topic (default: "topk.activity.raw.dlq")`, "<topic>.dlq"},
		{[]string{"activity", "ingest", "--help"}, `dead-letter topic (default: "topk.activity.dlq")`, "<topic>.dlq"},
		{[]string{"ingest", "--help"}, "dead-letter topic (default: <topic>.dlq)", "topk.activity"},
		{[]string{"activity", "check", "--help"}, "at least 1 (default: none, required)", "(default: 0)"},
		{[]string{"activity", "list", "--help"}, "default: 30 days", "RFC 3339 (default: 30 days ago)"},
		{[]string{"get", "--help"}, "1 to 1000", "0: all"},
	} {
		out := mustRun(t, tc.args...)
		if !strings.Contains(out, tc.has) || strings.Contains(out, tc.hasNo) {
			t.Errorf("topk %s: want %q and not %q in:\n%s", strings.Join(tc.args, " "), tc.has, tc.hasNo, out)
		}
	}
}
