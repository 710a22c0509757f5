package cli

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/topk-dev/topk/pkg/internal/userwords"
)

// Bad usage exits with ExitUsage and one line saying what was wrong and
// where the help is, for every command. Left to itself urfave/cli prints
// the whole help and exits 1 for a bad flag or a missing required flag,
// and exits 3 ("No help topic") for an unknown command; enforceUsage, which
// App calls once, replaces all three.

// usageError is a bad-usage exit of the command at path ("topk get").
func usageError(path, format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...)+" (see "+path+" --help)", ExitUsage)
}

// plainError is err's message in the user's words.
func plainError(err error) string { return userwords.Err(err) }

// enforceUsage gives app and every command in it the usage errors above:
// unknown commands (checked before any command runs), flags that are
// unknown, lack a value or do not parse, and missing required flags; and
// takes topk's operation prefixes out of every command's error.
func enforceUsage(app *cli.App) {
	app.OnUsageError = onUsageError("topk", nil)
	app.Before = checkCommandPath(app)
	for _, cmd := range app.Commands {
		enforceCommand(cmd, "topk "+cmd.Name)
	}
}

func enforceCommand(cmd *cli.Command, path string) {
	cmd.OnUsageError = onUsageError(path, cmd.Flags)
	if action := cmd.Action; action != nil {
		cmd.Action = func(c *cli.Context) error {
			err := action(c)
			if err == nil {
				return nil
			}
			if msg := userwords.Err(err); msg != err.Error() {
				return cli.Exit(msg, ExitStatus(err))
			}
			return err
		}
	}
	if required := takeRequired(cmd.Flags); len(required) > 0 {
		before := cmd.Before // e.g. the config file's (withConfig), which may set them
		cmd.Before = func(c *cli.Context) error {
			if before != nil {
				if err := before(c); err != nil {
					return err
				}
			}
			for _, name := range required {
				if !c.IsSet(name) {
					return usageError(path, "--%s is required", name)
				}
			}
			return nil
		}
	}
	for _, sub := range cmd.Subcommands {
		enforceCommand(sub, path+" "+sub.Name)
	}
}

// takeRequired returns the names of the required flags and makes them
// optional for urfave/cli, whose own check prints the whole help: the
// command's Before checks them instead.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		rf, ok := f.(cli.RequiredFlag)
		if !ok || !rf.IsRequired() {
			continue
		}
		// Every urfave/cli flag type (and altsrc's, which embed them) has
		// a Required field.
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		if req := v.Elem().FieldByName("Required"); req.IsValid() && req.Kind() == reflect.Bool && req.CanSet() {
			req.SetBool(false)
			names = append(names, f.Names()[0])
		}
	}
	return names
}

// checkCommandPath refuses an unknown command or subcommand, also after
// help ("topk help nosuch"), before anything runs.
func checkCommandPath(app *cli.App) cli.BeforeFunc {
	return func(c *cli.Context) error {
		cmds, path := app.Commands, "topk"
		for _, arg := range c.Args().Slice() {
			switch {
			case arg == "help" || arg == "h" || arg == "-h" || arg == "--help" || arg == "-help":
				continue
			case strings.HasPrefix(arg, "-"):
				return nil // a flag: the command it belongs to parses it
			}
			var next *cli.Command
			for _, cmd := range cmds {
				if cmd.HasName(arg) {
					next = cmd
					break
				}
			}
			if next == nil {
				return usageError(path, "unknown command %q", strings.TrimPrefix(path+" "+arg, "topk "))
			}
			if len(next.Subcommands) == 0 || next.Action != nil {
				return nil // the rest are the command's own arguments
			}
			cmds, path = next.Subcommands, path+" "+arg
		}
		return nil
	}
}

// onUsageError words a flag error of the command at path in the user's
// terms: the flag package says "flag provided but not defined: -bogus" or
// `invalid value "abc" for flag -k: parse error`.
func onUsageError(path string, flags []cli.Flag) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return usageError(path, "%s", flagProblem(err.Error(), flags))
	}
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	flagNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	badFlagValue  = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): (.*)$`)
)

func flagProblem(msg string, flags []cli.Flag) string {
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := flagNeedsArg.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + " needs a value"
	}
	m := badFlagValue.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	value, name, reason := m[1], m[2], m[3]
	if reason == "value out of range" {
		return fmt.Sprintf("--%s: %q is out of range", name, value)
	}
	// The flag package's reasons ("parse error") and time's ("time: invalid
	// duration") say nothing a user needs; a flag's own Value (timeValue)
	// says what it wants.
	if want := flagWants(flags, name); want != "" && (reason == "parse error" || strings.HasPrefix(reason, "time: ") || strings.HasPrefix(reason, "strconv.")) {
		return fmt.Sprintf("--%s: %q is not %s", name, value, want)
	}
	return fmt.Sprintf("--%s: %s", name, reason)
}

// flagWants says what values the flag called name takes, by its type
// (altsrc's flag types have the names of the ones they wrap).
func flagWants(flags []cli.Flag, name string) string {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			t := reflect.TypeOf(f)
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			switch t.Name() {
			case "IntFlag", "Int64Flag", "UintFlag", "Uint64Flag":
				return "a whole number"
			case "Float64Flag":
				return "a number"
			case "BoolFlag":
				return "true or false"
			case "DurationFlag":
				return "a duration (such as 500ms, 30s, 5m or 1h30m)"
			}
			return ""
		}
	}
	return ""
}
