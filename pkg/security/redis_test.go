package security

import (
	"errors"
	"fmt"
	"testing"
)

// TestClassifyRedis: the refusals Redis 6, 7.0 and 7.2+ answer, wrapped as
// topk wraps them, against errors that are not refusals.
func TestClassifyRedis(t *testing.T) {
	for _, tc := range []struct {
		msg    string
		want   RedisRefusal
		denied string
	}{
		{"WRONGPASS invalid username-password pair or user is disabled.", RefusedLogin, ""},
		{"NOAUTH Authentication required.", RefusedLogin, ""},
		{"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?", RefusedLogin, ""},
		{"ERR invalid password", RefusedLogin, ""},
		{"usercount.rollup: hour 493000: NOPERM this user has no permissions to run the 'sscan' command", RefusedACL, "the command 'sscan'"},
		{"NOPERM User topk-reader has no permissions to run the 'evalsha' command", RefusedACL, "the command 'evalsha'"},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", RefusedACL, "a key"},
		{"NOPERM No permissions to access a key", RefusedACL, "a key"},
		{"NOPERM this user has no permissions to access one of the channels used as arguments", RefusedACL, "a channel"},
		{"usercount.count: ERR The user executing the script can't run this command or subcommand script: b0d697da25b13e49157b2c214a4033546aba2104, on @user_script:1.", RefusedACL, "a command a Lua script calls"},
		{"ERR ACL failure in script: User topk-reader has no permissions to run the 'del' command script: b0d6, on @user_script:1.", RefusedACL, "the command 'del', which a Lua script calls"},
		{"dial tcp 127.0.0.1:1: connect: connection refused", NotRefused, ""},
		{"NOSCRIPT No matching script. Please use EVAL.", NotRefused, ""},
		{"ERR Error running script (call to f_x): @user_script:3: user_script:3: bad argument", NotRefused, ""},
		{"OOM command not allowed when used memory > 'maxmemory'.", NotRefused, ""},
		{"context deadline exceeded", NotRefused, ""},
	} {
		err := fmt.Errorf("wrapped: %w", errors.New(tc.msg))
		if got := ClassifyRedis(err); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.msg, got, tc.want)
		}
		if tc.want == RefusedACL {
			if got := RedisDenied(err); got != tc.denied {
				t.Errorf("%q: denied %q, want %q", tc.msg, got, tc.denied)
			}
		}
	}
	if ClassifyRedis(nil) != NotRefused || RedisDenied(nil) != "" {
		t.Error("nil is a refusal")
	}
}
