package cli_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestDockerComposeAPITokens: docker/compose.yaml's serve takes the API
// tokens from a file mounted as a Compose secret (TOPK_API_TOKENS_FILE
// under /run/secrets), holds no token itself (no TOPK_API_TOKENS, no
// --insecure-no-auth), and the secret's file is kept out of git.
func TestDockerComposeAPITokens(t *testing.T) {
	data, err := os.ReadFile("../../docker/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Secrets     []string          `yaml:"secrets"`
		} `yaml:"services"`
		Secrets map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	serve := compose.Services["serve"]
	file := serve.Environment["TOPK_API_TOKENS_FILE"]
	name, ok := strings.CutPrefix(file, "/run/secrets/")
	if !ok || !slices.Contains(serve.Secrets, name) {
		t.Fatalf("serve: TOPK_API_TOKENS_FILE %q, secrets %q; want a file under /run/secrets/ of one of its secrets", file, serve.Secrets)
	}
	source := compose.Secrets[name].File
	if source == "" {
		t.Fatalf("secret %q has no file", name)
	}
	if _, inline := serve.Environment["TOPK_API_TOKENS"]; inline || slices.Contains(serve.Command, "--insecure-no-auth") {
		t.Errorf("serve has TOPK_API_TOKENS inline or --insecure-no-auth: %v %q", serve.Environment, serve.Command)
	}
	gitignore, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + path.Join("docker", source); !slices.Contains(strings.Split(string(gitignore), "\n"), want) {
		t.Errorf(".gitignore lacks %s, the secret's file", want)
	}
}

// dockerignore is a .dockerignore's patterns, matched as Docker matches
// them: filepath.Match against the path and each of its parents, the last
// matching pattern deciding ("!" patterns re-include). It handles the
// patterns the repository's file uses, not "**".
type dockerignore []string

func (d dockerignore) excluded(p string) bool {
	out := false
	for _, pat := range d {
		neg := strings.HasPrefix(pat, "!")
		pat = strings.TrimPrefix(pat, "!")
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(pat, q); ok {
				out = !neg
				break
			}
		}
	}
	return out
}

// TestDockerignore: the build context of docker/Dockerfile (the
// repository root, filtered by its .dockerignore) holds every source and
// embedded file the binary's packages need, go.mod, go.sum and
// config/topk.yaml, which the Dockerfile copies; and neither .git, bin/,
// artifacts/ nor the compose file's API tokens. (No Docker engine here:
// the rules are applied as Docker applies them.)
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") {
			t.Fatalf("pattern %q: this test's matcher does not handle **", line)
		}
		d = append(d, path.Clean(strings.TrimPrefix(line, "/")))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum", "config/topk.yaml", "cmd/topk/main.go"}
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Standard,Module,GoFiles,EmbedFiles", "./cmd/topk")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var pkg struct {
			Dir        string
			Standard   bool
			Module     *struct{ Path string }
			GoFiles    []string
			EmbedFiles []string
		}
		if err := dec.Decode(&pkg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if pkg.Standard || pkg.Module == nil || pkg.Module.Path != "github.com/topk-dev/topk" {
			continue // the standard library, and modules go mod download fetches
		}
		rel, err := filepath.Rel(root, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(pkg.GoFiles, pkg.EmbedFiles...) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 50 {
		t.Fatalf("only %d files found as needed: %q", len(needed), needed)
	}
	for _, f := range needed {
		if d.excluded(f) {
			t.Errorf("%s is needed by the build but left out of the context", f)
		}
	}
	for _, f := range []string{".git/HEAD", ".git", "bin/topk", "artifacts/leaderboard-320px.png", "docker/api-tokens", "docker/compose.yaml", "README.md", "scripts/install-deps.sh", "topk.test", ".env"} {
		if !d.excluded(f) {
			t.Errorf("%s goes into the build context", f)
		}
	}
	// Nothing else of the work tree gets in.
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if d.excluded(rel) && !slices.ContainsFunc(d, func(pat string) bool { return strings.HasPrefix(pat, "!"+rel+"/") }) {
				return filepath.SkipDir
			}
			return nil
		}
		if top, _, _ := strings.Cut(rel, "/"); !d.excluded(rel) && !slices.Contains([]string{"go.mod", "go.sum", "cmd", "pkg", "lua", "config"}, top) {
			t.Errorf("%s goes into the build context", rel)
		}
		return nil
	})
}
