package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deploySection is README's Deploy section.
func deploySection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n## Deploy\n")
	if !ok {
		t.Fatal("README has no Deploy section")
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// TestReadmePaths: every file the Deploy section names is there.
func TestReadmePaths(t *testing.T) {
	s := deploySection(t)
	paths := regexp.MustCompile(`\bdeploy/[\w./-]*[\w/]`).FindAllString(s, -1)
	if len(paths) < 8 {
		t.Fatalf("README's Deploy section names %d files of deploy/", len(paths))
	}
	for _, p := range paths {
		if p == "deploy/.env" { // the operator's, from deploy/compose/env.example
			continue
		}
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Errorf("README names %s: %v", p, err)
		}
	}
}

// TestReadmeHelmInstall renders the chart with README's helm install
// command, as written, and decodes it.
func TestReadmeHelmInstall(t *testing.T) {
	h := helm(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not found: README's command makes its secrets with it")
	}
	cmd := regexp.MustCompile("(?s)```sh\n(helm install .*?)\n```").FindStringSubmatch(deploySection(t))
	if cmd == nil {
		t.Fatal("no helm install command in README's Deploy section")
	}
	script := `helm() { shift; "$HELM" template "$@" --kube-version ` + kubeVersion + `; }` + "\n" + cmd[1]
	run := exec.CommandContext(t.Context(), "bash", "-euc", script)
	run.Dir = repoRoot
	run.Env = append(os.Environ(), "HELM="+h)
	out, err := run.Output()
	if err != nil {
		t.Fatalf("README's helm install, rendered: %v\n%s", err, out)
	}
	r := sortObjects(t, decodeAll(t, out))
	if r.deployment == nil || r.deployment.Spec.Template.Spec.Containers[0].Image != "registry.example.com/lakegate:v1.2.3" {
		t.Errorf("README's helm install renders no Deployment of its image")
	}
	chartConfig(t, r, r.deployment.Spec.Template.Spec.Containers[0])
}
