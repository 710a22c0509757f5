package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/topk-dev/topk/pkg/devenv"
)

// ACLFile is the shipped Redis aclfile, relative to the module root.
const ACLFile = "config/redis-acl.conf"

// ACLPassword is the password RedisACL gives user.
func ACLPassword(user string) string { return user + "-Pa55" }

// ACLUsers reads config/redis-acl.conf: each user's rules (the words after
// its name, as shipped: "off" and no password), in the file's order.
func ACLUsers(t testing.TB) (names []string, rules map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), ACLFile))
	if err != nil {
		t.Fatal(err)
	}
	rules = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] != "user" || len(f) < 3 {
			t.Fatalf("%s: not a user line: %q", ACLFile, line)
		}
		names = append(names, f[1])
		rules[f[1]] = strings.Join(f[2:], " ")
	}
	if len(names) == 0 {
		t.Fatalf("%s has no user", ACLFile)
	}
	return names, rules
}

// RedisACL starts a throwaway redis-server whose aclfile is
// config/redis-acl.conf as an SRE deploys it: every user switched on and
// given its ACLPassword (the last rules of its line, so that the file's own
// resetpass comes before), its other rules untouched. Lines in extra are
// added (more users). The default user keeps every right, with no
// password, for the test's own setup and checks. It returns the server and
// the users of the file.
func RedisACL(t testing.TB, extra ...string) (*devenv.Redis, []string) {
	t.Helper()
	names, rules := ACLUsers(t)
	var lines []string
	for _, u := range names {
		f := strings.Fields(rules[u])
		for i, w := range f {
			if w == "off" {
				f[i] = "on"
			}
		}
		lines = append(lines, "user "+u+" "+strings.Join(f, " ")+" >"+ACLPassword(u))
	}
	lines = append(lines, extra...)
	file := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Redis(t, "--aclfile", file), names
}

// moduleRoot is the directory of go.mod, found upwards from the test's
// working directory (its package's).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
