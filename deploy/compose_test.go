package deploy

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// composeEnv is what deploy/.env would hold.
var composeEnv = map[string]string{
	"POSTGRES_PASSWORD":       "admin-password",
	"LOGIN_PASSWORD":          "login-password",
	"REPLICATION_PASSWORD":    "replication-password",
	"LAKEGATE_JWT_SECRET":     "0123456789abcdef0123456789abcdef0123456789abcdef",
	"LAKEGATE_CLUSTER_SECRET": "fedcba9876543210fedcba9876543210fedcba9876543210",
}

// loadCompose loads compose.yaml with the compose specification's own
// loader (schema, interpolation, anchors and merges), as docker compose
// and podman compose read it.
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  wd,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yaml")}},
		Environment: maps.Clone(env), // the loader adds to it
	}, func(o *loader.Options) { o.SkipResolveEnvironment = false })
}

func TestCompose(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	names := slices.Sorted(maps.Keys(p.Services))
	want := []string{"balancer", "primary", "replica-1", "replica-2", "replica-3", "standby"}
	if !slices.Equal(names, want) {
		t.Fatalf("services %q, want %q", names, want)
	}

	// make cluster's replicas' settings (integration/cluster.sh), and only
	// those the containers need beside them.
	script, err := os.ReadFile(filepath.Join(repoRoot, "integration/cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := map[string]bool{}
	for _, m := range regexp.MustCompile(`(LAKEGATE_[A-Z_]+)=`).FindAllStringSubmatch(string(script), -1) {
		cluster[m[1]] = true
	}
	extra := map[string]string{
		"LAKEGATE_CLUSTER_ADVERTISE_URL": "replicas listen on 0.0.0.0 and reach each other by service name",
		"LAKEGATE_SHUTDOWN_DELAY":        "out of the balancer's rotation before the listener closes",
	}
	balancer, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[string]bool{}
	for _, name := range []string{"replica-1", "replica-2", "replica-3"} {
		s := p.Services[name]
		env := map[string]string{}
		for k, v := range s.Environment {
			if v == nil {
				t.Fatalf("%s: %s has no value", name, k)
			}
			env[k] = *v
		}
		for k := range cluster {
			if _, ok := env[k]; !ok {
				t.Errorf("%s lacks %s, which make cluster sets", name, k)
			}
		}
		for k := range env {
			if _, ok := extra[k]; !cluster[k] && !ok {
				t.Errorf("%s sets %s, which make cluster does not", name, k)
			}
		}
		cfg := loadConfig(t, name, "", env)
		if len(cfg.Databases) != 1 || len(cfg.Databases[0].ReadURLs) != 1 {
			t.Fatalf("%s: databases %+v, want iot with one standby", name, cfg.Databases)
		}
		checkLogin(t, name+" database", cfg.Databases[0].URL)
		checkLogin(t, name+" read_urls", cfg.Databases[0].ReadURLs[0])
		checkLogin(t, name+" cluster_dsn", cfg.ClusterDSN)
		if !strings.Contains(cfg.Databases[0].URL, "@primary:") || !strings.Contains(cfg.Databases[0].ReadURLs[0], "@standby:") {
			t.Errorf("%s reads %s / %s, want the primary and the standby", name, cfg.Databases[0].URL, cfg.Databases[0].ReadURLs[0])
		}
		if cfg.QueryRole != "lakegate_reader" || len(cfg.ClusterSecret) < 32 || cfg.ClusterDSN == "" {
			t.Errorf("%s: query_role %q, cluster settings missing", name, cfg.QueryRole)
		}
		if cfg.ClusterAdvertiseURL != "http://"+name+":32049" {
			t.Errorf("%s advertises %s", name, cfg.ClusterAdvertiseURL)
		}
		advertised[name] = true
		if !regexp.MustCompile(`(?m)^\s*server \w+ ` + name + `:32049 check`).Match(balancer) {
			t.Errorf("haproxy.cfg does not check %s", name)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.Volumes) != 1 || s.Volumes[0].Target != cfg.DataDir {
			t.Errorf("%s: read_only %v cap_drop %v volumes %+v, want a read-only root, no capabilities, a volume at %s",
				name, s.ReadOnly, s.CapDrop, s.Volumes, cfg.DataDir)
		}
		for _, dep := range []string{"primary", "standby"} {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s does not wait for a healthy %s", name, dep)
			}
		}
	}
	if !regexp.MustCompile(`(?m)^\s*option httpchk GET /ready`).Match(balancer) {
		t.Error("haproxy.cfg does not check /ready")
	}

	// Every file the services mount is in the repository.
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s mounts %s: %v", s.Name, v.Source, err)
				}
			}
		}
	}
}

// TestComposePrimaryInit runs the primary's first-start script, with the
// files compose.yaml mounts and the environment it gives, on the test
// PostgreSQL: the data set readable by the SELECT-only role, the cluster
// database owned by the login, and the standby's replication role and
// pg_hba line.
func TestComposePrimaryInit(t *testing.T) {
	admin := os.Getenv("LAKEGATE_TEST_DATABASE_URL")
	if admin == "" {
		t.Skip("LAKEGATE_TEST_DATABASE_URL unset: make test-deploy runs under integration/with-postgres.sh")
	}
	psql := tool(t, "LAKEGATE_TEST_PSQL", "psql", "apt-get install postgresql-client")
	p, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	primary := p.Services["primary"]
	dir := t.TempDir()
	var script string
	for _, v := range primary.Volumes {
		switch {
		case v.Type != types.VolumeTypeBind:
		case strings.HasPrefix(v.Target, "/docker-entrypoint-initdb.d/"):
			script = v.Source
		case strings.HasPrefix(v.Target, "/lakegate/"):
			b, err := os.ReadFile(v.Source)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(v.Target)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if script == "" {
		t.Fatal("the primary mounts no script into /docker-entrypoint-initdb.d")
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	db := fmt.Sprintf("lakegate_compose_%d", time.Now().UnixNano()%1_000_000_000)
	output(t, psql, admin, "-qc", "CREATE DATABASE "+db)
	t.Cleanup(func() {
		for _, sql := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)",
			"DROP DATABASE IF EXISTS lakegate_cluster WITH (FORCE)", "DROP ROLE IF EXISTS replicator"} {
			_ = exec.Command(psql, admin, "-qc", sql).Run()
		}
	})
	pgdata := filepath.Join(dir, "pgdata")
	if err := os.MkdirAll(pgdata, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "PGHOST=" + u.Hostname(), "PGPORT=" + u.Port(),
		"POSTGRES_USER=" + u.User.Username(), "POSTGRES_DB=" + db, "PGDATA=" + pgdata, "SQL_DIR=" + dir}
	for k, v := range primary.Environment {
		switch k {
		case "POSTGRES_DB":
		case "CLUSTER_ROWS":
			env = append(env, k+"=100")
		default:
			env = append(env, k+"="+*v)
		}
	}
	cmd := exec.CommandContext(t.Context(), "sh", script)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("primary-init.sh: %v\n%s", err, out)
	}
	dbURL := withDatabase(t, admin, db, nil)
	for _, c := range []struct{ sql, want string }{
		{"SET ROLE lakegate_reader; SELECT count(*) FROM readings", "100"},
		{"SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'lakegate_cluster'", "lakegate"},
		{"SELECT rolreplication AND rolcanlogin AND NOT rolsuper FROM pg_roles WHERE rolname = 'replicator'", "t"},
		{"SELECT rolcanlogin AND NOT rolsuper AND NOT rolcreaterole FROM pg_roles WHERE rolname = 'lakegate'", "t"},
	} {
		if got := strings.TrimSpace(string(output(t, psql, dbURL, "-Atqc", c.sql))); got != c.want {
			t.Errorf("%s: got %q, want %q", c.sql, got, c.want)
		}
	}
	hba, _ := os.ReadFile(filepath.Join(pgdata, "pg_hba.conf"))
	if !strings.Contains(string(hba), "host replication replicator all scram-sha-256") {
		t.Errorf("pg_hba.conf lets the standby in with no line:\n%s", hba)
	}
}

// TestComposeNeedsSecrets: with a secret missing from .env, compose stops
// before it starts anything.
func TestComposeNeedsSecrets(t *testing.T) {
	for k := range composeEnv {
		env := maps.Clone(composeEnv)
		delete(env, k)
		if _, err := loadCompose(t, env); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v, want an error naming it", k, err)
		}
	}
}
