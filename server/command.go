package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// The EdgeLake-style command interface: GET or POST / with the command in a
// "command" header, or in a JSON body {"command": "..."}, answered in JSON.
// It lets existing REST clients drive lakegate without new routes.

// command is one known command: its words, the role it needs and its run.
type command struct {
	usage string
	words []string
	role  string
	run   func(s *Server, c *gin.Context, args commandArgs) (any, error)
}

// commandArgs are the parts of a command after its words.
type commandArgs struct {
	where  map[string]string // "where a = x and b = y"
	db     string            // sql's database
	format string            // sql's format
	sql    string            // sql's statement
}

func commands() []command {
	return []command{
		{"run mcp server", []string{"run", "mcp", "server"}, lakegate.RoleAdmin, func(s *Server, c *gin.Context, _ commandArgs) (any, error) {
			if err := s.plugin.set(c, true); err != nil {
				return nil, err
			}
			return s.plugin.state(), nil
		}},
		{"exit mcp server", []string{"exit", "mcp", "server"}, lakegate.RoleAdmin, func(s *Server, c *gin.Context, _ commandArgs) (any, error) {
			if err := s.plugin.set(c, false); err != nil {
				return nil, err
			}
			return s.plugin.state(), nil
		}},
		{"get mcp status", []string{"get", "mcp", "status"}, lakegate.RoleAdmin, func(s *Server, _ *gin.Context, _ commandArgs) (any, error) {
			return s.plugin.status()
		}},
		{"get status", []string{"get", "status"}, lakegate.RoleReader, func(s *Server, _ *gin.Context, _ commandArgs) (any, error) {
			return gin.H{"status": "running", "version": s.opts.Version, "mcp_enabled": s.plugin.enabled(),
				"uptime_s": int64(time.Since(s.started).Seconds())}, nil
		}},
		{"get databases", []string{"get", "databases"}, lakegate.RoleReader, func(s *Server, c *gin.Context, _ commandArgs) (any, error) {
			return gin.H{"databases": s.engine.DatabasesFor(caller(c))}, nil
		}},
		{"get tables where dbms = DB", []string{"get", "tables"}, lakegate.RoleReader, func(s *Server, c *gin.Context, a commandArgs) (any, error) {
			db, err := a.need("dbms")
			if err != nil {
				return nil, err
			}
			tables, err := s.engine.Tables(c.Request.Context(), caller(c), db)
			return gin.H{"database": db, "tables": tables}, err
		}},
		{"get columns where dbms = DB and table = TABLE", []string{"get", "columns"}, lakegate.RoleReader, func(s *Server, c *gin.Context, a commandArgs) (any, error) {
			db, err := a.need("dbms")
			if err != nil {
				return nil, err
			}
			table, err := a.need("table")
			if err != nil {
				return nil, err
			}
			return s.engine.Describe(c.Request.Context(), caller(c), db, table)
		}},
		{`sql DB format = json "SELECT ..."`, []string{"sql"}, lakegate.RoleReader, func(s *Server, c *gin.Context, a commandArgs) (any, error) {
			if a.format != "" && a.format != "json" {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("format %q is not supported", excerpt(a.format)), Hint: "use format = json"}
			}
			return s.engine.PrepareSQL(c.Request.Context(), caller(c), query.SQLRequest{Database: a.db, SQL: a.sql})
		}},
	}
}

func (a commandArgs) need(key string) (string, error) {
	if v := a.where[key]; v != "" {
		return v, nil
	}
	return "", &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("missing %q in the where clause", key),
		Hint: "e.g. get columns where dbms = iot and table = readings"}
}

// runCommand serves GET / and POST / for the command interface.
func (s *Server) runCommand(c *gin.Context) {
	text := c.GetHeader("command")
	if text == "" && c.Request.Method == http.MethodPost && c.Request.ContentLength != 0 {
		var body struct {
			Command string `json:"command"`
		}
		if err := decodeJSON(c.Request.Body, &body); err != nil {
			fail(c, err)
			return
		}
		text = body.Command
	}
	cmd, args, err := parseCommand(text)
	if err != nil {
		fail(c, err)
		return
	}
	if !caller(c).HasRole(cmd.role) {
		fail(c, lakegate.Errorf(lakegate.KindForbidden, "command %q needs the %s role", cmd.usage, cmd.role))
		return
	}
	out, err := s.runCommandWork(c, cmd, args)
	if err != nil {
		fail(c, err)
		return
	}
	if _, ok := out.(streamed); !ok {
		c.JSON(http.StatusOK, out)
	}
}

// readsDatabase reports whether cmd reads a database, and so takes a
// worker. The others (enable, disable, status) never wait for one.
func readsDatabase(cmd command) bool {
	switch strings.Join(cmd.words, " ") {
	case "sql", "get tables", "get columns":
		return true
	}
	return false
}

// runCommandWork runs cmd, holding a worker slot when it reads a database.
func (s *Server) runCommandWork(c *gin.Context, cmd command, args commandArgs) (any, error) {
	if !readsDatabase(cmd) {
		return cmd.run(s, c, args)
	}
	release, err := s.limits.admit(c.Request.Context(), caller(c).Subject, workREST)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := cmd.run(s, c, args)
	if st, ok := out.(*query.Stmt); ok && err == nil {
		streamResult(c, s.log, st, "")
		s.metrics.returned(workREST, int64(c.GetInt(rowsKey)), 0)
		return streamed{}, nil
	}
	return out, err
}

// streamed is what runCommandWork returns for a result it has written.
type streamed struct{}

// parseCommand finds the command text names and reads its arguments.
func parseCommand(text string) (command, commandArgs, error) {
	words, err := splitCommand(text)
	if err != nil {
		return command{}, commandArgs{}, err
	}
	if len(words) == 0 {
		return command{}, commandArgs{}, unknownCommand("no command given")
	}
	var best command
	for _, cmd := range commands() {
		if len(words) >= len(cmd.words) && equalFold(words[:len(cmd.words)], cmd.words) && len(cmd.words) > len(best.words) {
			best = cmd
		}
	}
	if best.words == nil {
		return command{}, commandArgs{}, unknownCommand(fmt.Sprintf("unknown command %q", excerpt(text)))
	}
	rest := words[len(best.words):]
	var args commandArgs
	if best.words[0] == "sql" {
		args, err = parseSQLArgs(rest)
	} else {
		args.where, err = parseWhere(rest)
	}
	if err != nil {
		return command{}, commandArgs{}, err
	}
	return best, args, nil
}

// excerptBytes bounds the input an error message quotes back.
const excerptBytes = 64

// excerpt is s cut to excerptBytes (on a UTF-8 boundary) with "…", so that
// an error never echoes a large input back.
func excerpt(s string) string {
	if len(s) <= excerptBytes {
		return s
	}
	n := excerptBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func unknownCommand(msg string) error {
	var known []string
	for _, cmd := range commands() {
		known = append(known, cmd.usage)
	}
	return &lakegate.Error{Kind: lakegate.KindValidation, Message: msg, Hint: "known commands: " + strings.Join(known, "; ")}
}

// parseWhere reads "where k = v and k = v"; nothing at all is fine.
func parseWhere(words []string) (map[string]string, error) {
	where := map[string]string{}
	if len(words) == 0 {
		return where, nil
	}
	if !strings.EqualFold(words[0], "where") {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unexpected %q", excerpt(words[0])), Hint: "conditions start with: where key = value"}
	}
	words = words[1:]
	for len(words) > 0 {
		if len(words) < 3 || words[1] != "=" {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "a where condition must read: key = value", Hint: "join conditions with and"}
		}
		where[strings.ToLower(words[0])] = words[2]
		words = words[3:]
		if len(words) > 0 {
			if !strings.EqualFold(words[0], "and") {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unexpected %q between conditions", excerpt(words[0])), Hint: "join conditions with and"}
			}
			words = words[1:]
		}
	}
	return where, nil
}

// parseSQLArgs reads: DB [format = F] [and ...] "SELECT ...".
func parseSQLArgs(words []string) (commandArgs, error) {
	usage := &lakegate.Error{Kind: lakegate.KindValidation, Message: "sql command: want sql DB [format = json] \"SELECT ...\"",
		Hint: `e.g. sql iot format = json "SELECT count(*) FROM readings"`}
	if len(words) < 2 {
		return commandArgs{}, usage
	}
	a := commandArgs{db: words[0], sql: words[len(words)-1]}
	opts := words[1 : len(words)-1]
	for len(opts) > 0 {
		if strings.EqualFold(opts[0], "and") {
			opts = opts[1:]
			continue
		}
		if len(opts) < 3 || opts[1] != "=" {
			return commandArgs{}, usage
		}
		switch strings.ToLower(opts[0]) {
		case "format":
			a.format = strings.ToLower(opts[2])
		default:
			return commandArgs{}, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("sql option %q is not supported", excerpt(opts[0])), Hint: "supported: format = json"}
		}
		opts = opts[3:]
	}
	return a, nil
}

// splitCommand splits on spaces, keeping "quoted" or 'quoted' parts whole
// and "=" as a word of its own.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '"' || r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != r {
				j++
			}
			if j == len(rs) {
				return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unterminated %c quote in command", r)}
			}
			flush()
			words = append(words, string(rs[i+1:j]))
			i = j
		case r == '=':
			flush()
			words = append(words, "=")
		case unicode.IsSpace(r):
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return words, nil
}

func equalFold(a, b []string) bool {
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}
