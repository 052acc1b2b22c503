// Command embed is an existing Gin data server, with its own routes and its
// own authentication, that mounts lakegate's MCP plugin and query engine:
// the product's first promise, MCP added to an HTTP data server in a few
// lines. Identity passes through the kernel (lakegate.WithCaller).
//
//	EMBED_DATABASE_URL=postgres://... EMBED_LISTEN=127.0.0.1:8080 go run ./examples/embed
//
// Callers send "Authorization: Bearer <key>" with a key of EMBED_API_KEYS
// (name=key,name=key); without a database URL it serves lakegate's
// embedded demo database from a temporary file.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	db := config.Database{Name: "iot", URL: os.Getenv("EMBED_DATABASE_URL")}
	if db.URL == "" {
		path := filepath.Join(os.TempDir(), "embed-demo.db")
		if err := query.CreateDemo(ctx, path); err != nil {
			return err
		}
		db = config.Database{Name: "demo", URL: "sqlite:" + path}
	}

	// lakegate: the query engine and the MCP plugin on it.
	// Callers' SQL runs as EMBED_QUERY_ROLE, a role holding SELECT only:
	// query.Open refuses a privileged one.
	engine, err := query.Open(ctx, []config.Database{db}, &query.Options{QueryRole: os.Getenv("EMBED_QUERY_ROLE")})
	if err != nil {
		return err
	}
	// What run builds, run closes, the last built first: the plugin, then
	// the engine.
	defer engine.Close(context.Background())
	plugin, err := mcp.New(engine, &mcp.Options{Tools: lakegate.DefaultTools, Enabled: true})
	if err != nil {
		return err
	}
	defer plugin.Close(context.Background())

	// The existing server: its own routes and its own auth.
	r := gin.New()
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello from the host\n") })
	authed := r.Group("", apiKeyAuth(parseKeys(os.Getenv("EMBED_API_KEYS"))))
	authed.GET("/whoami", func(c *gin.Context) {
		caller, _ := lakegate.CallerFrom(c.Request.Context())
		c.String(http.StatusOK, caller.Subject+"\n")
	})
	plugin.Mount(authed, nil) // /mcp, /mcp/sse, /mcp/messages/

	addr := os.Getenv("EMBED_LISTEN")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "embed listening on http://%s\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The MCP sessions' streams never end alone: the plugin's drain ends
	// them, so that the server's Shutdown does not wait for them.
	_ = plugin.Shutdown(drain)
	return srv.Shutdown(drain)
}

// apiKeyAuth is the host's own authentication: a bearer API key names the
// caller, who reads (lakegate.RoleReader).
func apiKeyAuth(keys map[string]string) gin.HandlerFunc {
	return func(c *gin.Context) {
		key := strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")
		name, ok := keys[key]
		if !ok || key == "" {
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "unknown API key"})
			return
		}
		caller := lakegate.Caller{Subject: name, Roles: []string{lakegate.RoleReader}}
		c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), caller))
	}
}

// parseKeys reads name=key,name=key.
func parseKeys(s string) map[string]string {
	keys := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if name, key, ok := strings.Cut(strings.TrimSpace(pair), "="); ok && key != "" {
			keys[key] = name
		}
	}
	return keys
}
