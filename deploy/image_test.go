package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageConfig is what the test reads of an image's configuration.
type imageConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		Env          []string
		ExposedPorts map[string]struct{}
	} `json:"config"`
}

// imageFile is one entry of the image's file system.
type imageFile struct {
	uid  int
	mode os.FileMode
	dir  bool
}

// engine is podman, or docker when its engine answers.
func engine(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("podman"); err == nil {
		return p
	}
	if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "info").Run() == nil {
		return p
	}
	t.Skip("neither podman nor a running docker engine: the image is not built (apt-get install podman)")
	return ""
}

// unpackImage saves image as an archive and unpacks its layers into a new
// directory; it returns that directory, the configuration and every path.
func unpackImage(t *testing.T, image string) (string, imageConfig, map[string]imageFile) {
	t.Helper()
	eng := engine(t)
	if exec.Command(eng, "image", "inspect", image).Run() != nil {
		t.Fatalf("image %s not found: make image IMAGE=%s builds it", image, image)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	output(t, eng, "save", "-o", archive, image)
	entries := readTar(t, archive)
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json of the saved image: %v (%d images)", err, len(manifest))
	}
	var cfg imageConfig
	if err := json.Unmarshal(entries[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("image config %s: %v", manifest[0].Config, err)
	}
	root := filepath.Join(dir, "rootfs")
	files := map[string]imageFile{}
	for _, l := range manifest[0].Layers {
		unpackLayer(t, entries[l], root, files)
	}
	return root, cfg, files
}

// readTar reads a whole (small) archive into memory, by entry name.
func readTar(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, h.Name, err)
		}
		out[path.Clean(h.Name)] = b
	}
}

// unpackLayer writes a layer's regular files under root and records every
// entry's path, owner and mode in files.
func unpackLayer(t *testing.T, layer []byte, root string, files map[string]imageFile) {
	t.Helper()
	var r io.Reader = bytes.NewReader(layer)
	if bytes.HasPrefix(layer, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		files[name] = imageFile{uid: h.Uid, mode: h.FileInfo().Mode(), dir: h.Typeflag == tar.TypeDir}
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, h.FileInfo().Mode().Perm()|0o200); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestImage checks the image make image built (LAKEGATE_TEST_IMAGE): its
// configuration and file system, and that its entrypoint, run from the
// unpacked file system, serves the test PostgreSQL through the
// least-privileged roles and answers /ready.
func TestImage(t *testing.T) {
	image := os.Getenv("LAKEGATE_TEST_IMAGE")
	if image == "" {
		t.Skip("LAKEGATE_TEST_IMAGE unset: make test-deploy builds the image (make image) and names it")
	}
	root, cfg, files := unpackImage(t, image)

	t.Run("config", func(t *testing.T) {
		c := cfg.Config
		if c.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532 (non-root)", c.User)
		}
		if !slices.Equal(c.Entrypoint, []string{"/lakegate"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
			t.Errorf("entrypoint %q cmd %q, want [/lakegate] [serve]", c.Entrypoint, c.Cmd)
		}
		if _, ok := c.ExposedPorts["32049/tcp"]; !ok {
			t.Errorf("exposed ports %v, want 32049/tcp", c.ExposedPorts)
		}
		env := envMap(c.Env)
		checkNames(t, "image", env)
		if env["LAKEGATE_LISTEN"] != "0.0.0.0:32049" || env["LAKEGATE_DATA_DIR"] != "/data" {
			t.Errorf("env %q: want LAKEGATE_LISTEN=0.0.0.0:32049 and LAKEGATE_DATA_DIR=/data", c.Env)
		}
	})

	t.Run("files", func(t *testing.T) {
		// Everything the image holds: no shell, no libc, nothing else.
		want := []string{"data", "etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs",
			"etc/ssl/certs/ca-certificates.crt", "lakegate"}
		var got []string
		for name := range files {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("image files %q, want %q", got, want)
		}
		for _, sh := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
			if _, ok := files[sh]; ok {
				t.Errorf("the image has %s", sh)
			}
		}
		if f := files["data"]; !f.dir || f.uid != 65532 {
			t.Errorf("/data: dir %v uid %d, want a directory of uid 65532", f.dir, f.uid)
		}
		if f := files["lakegate"]; f.uid != 0 || f.mode.Perm()&0o022 != 0 || f.mode.Perm()&0o111 == 0 {
			t.Errorf("/lakegate: uid %d mode %v, want root's, executable, not writable by others", f.uid, f.mode)
		}
		passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
		if !bytes.Contains(passwd, []byte("lakegate:x:65532:65532:")) {
			t.Errorf("/etc/passwd names no user 65532:\n%s", passwd)
		}
		cas, _ := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
		if !x509.NewCertPool().AppendCertsFromPEM(cas) {
			t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificate")
		}
		bin, err := elf.Open(filepath.Join(root, "lakegate"))
		if err != nil {
			t.Fatal(err)
		}
		defer bin.Close()
		for _, p := range bin.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("/lakegate asks for a dynamic loader: not a static binary (CGO_ENABLED=0)")
			}
		}
		if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("/lakegate needs %q", libs)
		}
	})

	t.Run("serves", func(t *testing.T) {
		serveFromImage(t, root, envMap(cfg.Config.Env))
	})

	// With no database, as podman run gives it: the demo in /data, and
	// the connection help with tokens on standard output.
	t.Run("demo", func(t *testing.T) {
		srv := startFromImage(t, root, envMap(cfg.Config.Env), nil)
		srv.stop(t)
		if out := srv.log.String(); !strings.Contains(out, "serving the embedded demo database") || !strings.Contains(out, "token") {
			t.Errorf("the demo start printed no demo database or tokens:\n%s", out)
		}
	})
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// serveFromImage makes a database with the chart's roles on the test
// PostgreSQL, runs the image's /lakegate serve on it as the login role,
// with callers' SQL as the SELECT-only role and the cluster state in a
// database of the login's own, and waits for /ready; then a reader's query
// answers and SIGTERM ends it with 0.
func serveFromImage(t *testing.T, root string, imageEnv map[string]string) {
	admin := os.Getenv("LAKEGATE_TEST_DATABASE_URL")
	if admin == "" {
		t.Skip("LAKEGATE_TEST_DATABASE_URL unset: make test-deploy runs under integration/with-postgres.sh")
	}
	psql := tool(t, "LAKEGATE_TEST_PSQL", "psql", "the roles are made with psql (apt-get install postgresql-client)")
	db := fmt.Sprintf("lakegate_deploy_%d", time.Now().UnixNano()%1_000_000_000)
	clusterDB := db + "_cluster"
	password := "deploy-test-password"
	output(t, psql, admin, "-qc", "CREATE DATABASE "+db)
	t.Cleanup(func() {
		for _, d := range []string{db, clusterDB} {
			_ = exec.Command(psql, admin, "-qc", "DROP DATABASE IF EXISTS "+d+" WITH (FORCE)").Run()
		}
	})
	adminDB := withDatabase(t, admin, db, nil)
	output(t, psql, adminDB, "-v", "ON_ERROR_STOP=1", "-qc",
		"CREATE TABLE readings (id int PRIMARY KEY); INSERT INTO readings SELECT generate_series(1, 42)")
	files := filepath.Join("helm", "lakegate", "files")
	output(t, psql, adminDB, "-q", "-v", "ON_ERROR_STOP=1", "-v", "password="+password, "-v", "cluster_db="+clusterDB,
		"-f", filepath.Join(files, "roles.sql"), "-f", filepath.Join(files, "login.sql"))
	login := url.UserPassword("lakegate", password)

	secret := "0123456789abcdef0123456789abcdef"
	databases, _ := json.Marshal([]map[string]string{{"name": "iot", "url": withDatabase(t, admin, db, login)}})
	srv := startFromImage(t, root, imageEnv, map[string]string{
		"LAKEGATE_DATABASES":      string(databases),
		"LAKEGATE_QUERY_ROLE":     "lakegate_reader",
		"LAKEGATE_JWT_SECRET":     secret,
		"LAKEGATE_CLUSTER_DSN":    withDatabase(t, admin, clusterDB, login),
		"LAKEGATE_CLUSTER_SECRET": "fedcba9876543210fedcba9876543210",
	})
	bin, base, ctx := srv.bin, srv.base, t.Context()
	tok := exec.Command(bin, "token", "--sub", "deploy-test", "--role", "reader", "--ttl", "5m")
	tok.Env = []string{"LAKEGATE_JWT_SECRET=" + secret}
	token, err := tok.Output()
	if err != nil {
		t.Fatalf("lakegate token: %v", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/rest/sql",
		strings.NewReader(`{"database":"iot","sql":"SELECT count(*) AS n FROM readings"}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte("42")) {
		t.Errorf("POST /rest/sql: %d %s, want 200 and a count of 42", resp.StatusCode, answer)
	}

	srv.stop(t)
}

// imageServer is /lakegate serve started from the unpacked image.
type imageServer struct {
	bin, base string
	cmd       *exec.Cmd
	log       *bytes.Buffer
	exited    chan error
	stopped   bool
}

// startFromImage runs the image's /lakegate serve with the image's
// environment and env (nothing of the host's), listening on a loopback
// port with a data dir of the test's, and waits for /ready to answer 200.
func startFromImage(t *testing.T, root string, imageEnv, env map[string]string) *imageServer {
	t.Helper()
	port := freePort(t)
	all := maps.Clone(imageEnv)
	maps.Copy(all, env)
	all["LAKEGATE_LISTEN"] = "127.0.0.1:" + port
	all["LAKEGATE_DATA_DIR"] = t.TempDir()
	all["TMPDIR"] = all["LAKEGATE_DATA_DIR"]
	var list []string
	for k, v := range all {
		list = append(list, k+"="+v)
	}
	s := &imageServer{bin: filepath.Join(root, "lakegate"), base: "http://127.0.0.1:" + port,
		log: &bytes.Buffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(s.bin, "serve")
	s.cmd.Env = list
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if !s.stopped {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	status, body := 0, ""
	for ctx.Err() == nil {
		if status, body = get(ctx, s.base+"/ready", ""); status == http.StatusOK {
			return s
		}
		select {
		case err := <-s.exited:
			s.stopped = true
			t.Fatalf("/lakegate serve exited before /ready answered 200: %v\n%s", err, s.log.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.stop(t)
	t.Fatalf("/ready: %d %s\n%s", status, body, s.log.String())
	return nil
}

// stop sends SIGTERM and expects exit 0 within 30 s.
func (s *imageServer) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.stopped = true
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0\n%s", err, s.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("still running 30 s after SIGTERM\n%s", s.log.String())
	}
}

// withDatabase is the URL u pointing at database db, as user when set.
func withDatabase(t *testing.T, u, db string, user *url.Userinfo) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("LAKEGATE_TEST_DATABASE_URL: %v", err)
	}
	p.Path = "/" + db
	if user != nil {
		p.User = user
	}
	return p.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// get returns the status and body of GET u; 0 when it cannot connect.
func get(ctx context.Context, u, token string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}
