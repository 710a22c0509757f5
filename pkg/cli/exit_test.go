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
		// Required flags, and values the command itself refuses, before
		// any backend is dialled (Redis is unreachable here).
		{[]string{"activity", "count"}, 2, "--user is required (see topk activity count --help)"},
		{[]string{"activity", "check", "--user", "u"}, 2, "--limit is required"},
		{[]string{"activity", "list", "--postgres", "postgres://x"}, 2, "--user is required"},
		{[]string{"get", "--redis", unreachable}, 2, "give either --workspace W or --global"},
		{[]string{"get", "--redis", unreachable, "-w", "x", "--window", "2h"}, 2, `unknown --window "2h"`},
		{[]string{"get", "--config", "/nonexistent/topk.yaml", "-w", "x"}, 2, "cannot read the --config file"},
		// Failures: the backend is unreachable.
		{[]string{"get", "--redis", unreachable, "-w", "x"}, 1, "cannot reach Redis at " + unreachable},
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
		for _, internal := range []string{"Incorrect Usage", "No help topic", "flag provided", "parse error", "inner error"} {
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
