package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitDirectives reads a unit file's [Service] directives, each name with
// its values in order.
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			out[k] = append(out[k], v)
		}
	}
	return out
}

// envFile reads a systemd EnvironmentFile of VAR=value lines, a value in
// single quotes taken as it is written.
func envFile(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no VAR=value", file, line)
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		} else if strings.ContainsAny(v, `"'\ `) {
			t.Errorf("%s: %s's value needs single quotes (systemd would take its quotes away)", file, k)
		}
		env[k] = v
	}
	return env
}

func TestUnit(t *testing.T) {
	text, err := os.ReadFile("lakegate.service")
	if err != nil {
		t.Fatal(err)
	}
	d := unitDirectives(t, string(text))
	for k, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "StateDirectory": "lakegate",
		"EnvironmentFile": "/etc/lakegate/lakegate.env", "ProtectHome": "yes", "PrivateTmp": "yes",
		"CapabilityBoundingSet": "", "Type": "exec", "Restart": "on-failure",
	} {
		if v := d[k]; len(v) != 1 || v[0] != want {
			t.Errorf("%s=%q, want %q", k, v, want)
		}
	}
	if len(d["LimitNOFILE"]) != 1 {
		t.Error("no LimitNOFILE")
	}
	// The settings file and the unit's own Environment= lines, loaded as
	// lakegate serve would.
	env := envFile(t, "lakegate.env")
	for _, e := range d["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = strings.ReplaceAll(v, "%S", "/var/lib")
	}
	cfg := loadConfig(t, "lakegate.service", "", env)
	for _, db := range cfg.Databases {
		checkLogin(t, "lakegate.env database "+db.Name, db.URL)
	}
	if cfg.QueryRole != "lakegate_reader" || cfg.DataDir != "/var/lib/lakegate" {
		t.Errorf("query_role %q data_dir %q, want lakegate_reader and the StateDirectory", cfg.QueryRole, cfg.DataDir)
	}
	stop, err := time.ParseDuration(d["TimeoutStopSec"][0])
	if need := time.Duration(cfg.ShutdownDelay+cfg.DrainTimeout) + 5*time.Second; err != nil || stop < need {
		t.Errorf("TimeoutStopSec %q, want at least shutdown_delay + drain_timeout + 5 s = %v", d["TimeoutStopSec"], need)
	}

	sa := tool(t, "LAKEGATE_TEST_SYSTEMD_ANALYZE", "systemd-analyze", "apt-get install systemd")
	// verify needs ExecStart's program to exist: the unit as installed,
	// with this test's binary in place of /usr/local/bin/lakegate.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "lakegate.service")
	if !strings.Contains(string(text), "ExecStart=/usr/local/bin/lakegate serve") {
		t.Fatal("ExecStart is not /usr/local/bin/lakegate serve (README's install step)")
	}
	installed := strings.Replace(string(text), "/usr/local/bin/lakegate", self, 1)
	if err := os.WriteFile(unit, []byte(installed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), sa, "verify", unit).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score of the sandboxing, 0 (locked down) to 10: 2.0 at most.
	out, err := exec.CommandContext(t.Context(), sa, "security", "--offline=true", "--threshold=20", unit).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: %v\n%s", err, out)
	}
}

// TestUnitVerifyFails: a misspelled directive makes the check fail.
func TestUnitVerifyFails(t *testing.T) {
	sa := tool(t, "LAKEGATE_TEST_SYSTEMD_ANALYZE", "systemd-analyze", "apt-get install systemd")
	text, err := os.ReadFile("lakegate.service")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	bad := strings.Replace(strings.Replace(string(text), "/usr/local/bin/lakegate", self, 1), "NoNewPrivileges=", "NoNewPrivilege=", 1)
	unit := filepath.Join(t.TempDir(), "lakegate.service")
	if err := os.WriteFile(unit, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.CommandContext(t.Context(), sa, "verify", unit).CombinedOutput()
	if !strings.Contains(string(out), "NoNewPrivilege") {
		t.Errorf("systemd-analyze verify said nothing of a misspelled directive: %q", out)
	}
}
