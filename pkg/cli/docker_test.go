package cli_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/topk-dev/topk/pkg/cli"
	"github.com/topk-dev/topk/pkg/internal/testenv"
)

// composeService is the part of a docker/compose.yaml service this test reads.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Restart     string            `yaml:"restart"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// interpolation is compose's ${VAR:-default}.
var interpolation = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// TestDockerCompose checks docker/compose.yaml, which cannot be run here (no
// Docker engine), against the CLI: every topk service's command line goes
// through the CLI's own parsing with --help appended (so nothing runs), with
// its TOPK_* variables set, and must name an existing command, flags that
// command has and values they accept; every TOPK_* variable must be one of
// that command's flags. It also checks the deployment's shape: the scripts
// are loaded before any worker starts, each long-running topk service has a
// health check and a restart policy, serve's check is /readyz on the port it
// listens on, and the image carries the busybox the checks call.
func TestDockerCompose(t *testing.T) {
	data, err := os.ReadFile("../../docker/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("../../docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}

	want := map[string][]string{ // the topk services and their commands
		"scripts":          {"scripts", "load"},
		"ingest":           {"ingest"},
		"schedule":         {"schedule"},
		"serve":            {"serve"},
		"activity-ingest":  {"activity", "ingest"},
		"activity-archive": {"activity", "archive"},
	}
	for name, path := range want {
		t.Run(name, func(t *testing.T) {
			svc, ok := compose.Services[name]
			if !ok {
				t.Fatalf("no service %q", name)
			}
			if svc.Image != "topk:latest" {
				t.Errorf("image %q, want topk:latest", svc.Image)
			}
			if !slices.Equal(svc.Command[:len(path)], path) {
				t.Fatalf("command %q, want topk %s", svc.Command, strings.Join(path, " "))
			}

			// The command line through the CLI's parsing.
			env := map[string]string{}
			for k, v := range svc.Environment {
				if strings.HasPrefix(k, "TOPK_") {
					env[k] = interpolation.ReplaceAllString(v, "$1")
					t.Setenv(k, env[k])
				}
			}
			var out, errOut testenv.SyncBuffer
			app := cli.App(cli.Env{Out: &out, Err: &errOut})
			args := append(append([]string{"topk"}, svc.Command...), "--help")
			if err := app.Run(args); err != nil {
				t.Fatalf("topk %s: %v\n%s", strings.Join(svc.Command, " "), err, errOut.String())
			}
			if head := "topk " + strings.Join(path, " ") + " - "; !strings.Contains(out.String(), head) {
				t.Fatalf("topk %s --help did not show the help of %q:\n%s", strings.Join(svc.Command, " "), head, out.String())
			}

			// Every TOPK_* variable belongs to one of the command's flags.
			cmd := app.Command(path[0])
			for _, sub := range path[1:] {
				cmd = cmd.Command(sub)
			}
			var vars []string
			for _, f := range cmd.Flags {
				if e, ok := f.(interface{ GetEnvVars() []string }); ok {
					vars = append(vars, e.GetEnvVars()...)
				}
			}
			for k := range env {
				if !slices.Contains(vars, k) {
					t.Errorf("%s is not a variable of topk %s", k, strings.Join(path, " "))
				}
			}

			// Start-up order, restarts, health.
			if name == "scripts" {
				if svc.Restart != "on-failure" {
					t.Errorf("restart %q, want on-failure (it exits once the scripts are loaded)", svc.Restart)
				}
				if svc.DependsOn["redis"].Condition != "service_healthy" {
					t.Errorf("scripts do not wait for a healthy Redis: %+v", svc.DependsOn)
				}
				return
			}
			if svc.Restart != "unless-stopped" {
				t.Errorf("restart %q, want unless-stopped", svc.Restart)
			}
			if svc.Healthcheck == nil || len(svc.Healthcheck.Test) < 2 {
				t.Fatalf("no health check")
			}
			if svc.Healthcheck.Test[1] == "/busybox/busybox" && !strings.Contains(string(dockerfile), "/busybox/busybox") {
				t.Errorf("the health check calls /busybox/busybox, which the Dockerfile does not install")
			}
			if name == "serve" {
				listen := svc.Command[slices.Index(svc.Command, "--listen")+1]
				_, port, _ := strings.Cut(listen, ":")
				if u := svc.Healthcheck.Test[len(svc.Healthcheck.Test)-1]; u != "http://127.0.0.1:"+port+"/readyz" {
					t.Errorf("serve's health check asks %q, want /readyz on port %s", u, port)
				}
			}
			for dep, cond := range map[string]string{"scripts": "service_completed_successfully"} {
				if name != "activity-archive" && svc.DependsOn[dep].Condition != cond {
					t.Errorf("depends_on %s: %q, want %s", dep, svc.DependsOn[dep].Condition, cond)
				}
			}
			uses := func(flag string) bool { return slices.Contains(svc.Command, flag) }
			for flag, dep := range map[string]string{"--brokers": "kafka", "--redis": "redis"} {
				if uses(flag) && svc.DependsOn[dep].Condition != "service_healthy" {
					t.Errorf("uses %s but does not wait for a healthy %s", flag, dep)
				}
			}
			if _, ok := env["TOPK_POSTGRES"]; ok && svc.DependsOn["postgres"].Condition != "service_healthy" {
				t.Errorf("uses PostgreSQL but does not wait for a healthy postgres")
			}
		})
	}
}
