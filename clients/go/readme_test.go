package neatroots_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's "Use" snippet is a whole program that compiles against this module: it is
// written to a module of its own (this checkout standing in for the module's address) and
// `go vet` builds and checks it. It had placeholders and an unused variable, so it did not
// compile as written.
func TestTheReadmeUseSnippetBuilds(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	use := strings.Index(text, "\n## Use\n")
	if use < 0 {
		t.Fatal(`README.md has no "## Use" section`)
	}
	const fence = "```go\n"
	start := strings.Index(text[use:], fence)
	if start < 0 {
		t.Fatal(`README.md's "## Use" has no go snippet`)
	}
	start += use + len(fence)
	end := strings.Index(text[start:], "\n```")
	if end < 0 {
		t.Fatal("README.md's go snippet is not closed")
	}
	snippet := text[start : start+end+1]

	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const module = "github.com/neatroots/neatroots/clients/go"
	files := map[string]string{
		"main.go": snippet,
		"go.mod":  "module example.com/agent\n\ngo 1.24\n\nrequire " + module + " v0.0.0\n\nreplace " + module + " => " + here + "\n",
		"go.sum":  string(sums),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go on PATH to build the snippet with: %v", err)
	}
	cmd := exec.Command(goBin, "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's snippet does not build: %v\n%s\n--- main.go ---\n%s", err, out, snippet)
	}
}
