package mcp

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An operator edits tools.json in mcp_config_dir while the server runs:
// toolsWatch looks at the file every interval and, when it changed (or
// appeared, or went: then the built-in tools serve), reads it as start-up
// does. A file that does not parse, or declares a statement the validator
// refuses, is refused with the line and the reason at ERROR, and the tools
// in use stay. A good one replaces them: the SDK tells every connected
// session notifications/tools/list_changed, and a call of a tool no longer
// declared is an unknown tool.

// DefaultToolsInterval is how often mcp_config_dir's tools.json is looked at.
const DefaultToolsInterval = 2 * time.Second

// toolsWatch reloads the tool declarations when the file changes.
type toolsWatch struct {
	file    string
	builtin []byte
	server  *mcpsdk.Server
	tools   *toolset
	log     *slog.Logger
	stamp   fileStamp // of the declarations in use

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// fileStamp tells one version of a file from another (zero: no file).
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(file string) (fileStamp, error) {
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// watchTools starts watching dir's tools.json, every interval; nil
// without a dir.
func watchTools(dir string, builtin []byte, server *mcpsdk.Server, tools *toolset, interval time.Duration, log *slog.Logger) *toolsWatch {
	if dir == "" {
		return nil
	}
	w := &toolsWatch{file: filepath.Join(dir, ToolsFile), builtin: builtin, server: server, tools: tools, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	w.stamp, _ = stampOf(w.file) // what New read
	go w.run(interval)
	return w
}

func (w *toolsWatch) run(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.check()
		}
	}
}

// check reloads the declarations when the file changed since the last
// look; a version that was refused is not read again until it changes.
func (w *toolsWatch) check() {
	stamp, err := stampOf(w.file)
	if err != nil || stamp == w.stamp {
		return
	}
	w.stamp = stamp
	specs, err := loadTools(w.builtin, filepath.Dir(w.file))
	if err != nil {
		w.log.Error("tools.json not reloaded: the tools in use stay", "file", w.file, "error", err.Error())
		return
	}
	w.apply(specs)
	w.log.Info("tools.json reloaded", "file", w.file, "tools", len(specs))
}

// apply makes specs the declared tools: the tools no longer declared go
// first, then the roles are set (so that no tool is ever offered wider than
// declared), then the tools are added or replaced. Each change reaches the
// connected sessions as notifications/tools/list_changed.
func (w *toolsWatch) apply(specs []toolSpec) {
	var gone []string
	for _, n := range w.tools.names() {
		if !slices.ContainsFunc(specs, func(t toolSpec) bool { return t.Name == n }) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		w.server.RemoveTools(gone...)
	}
	w.tools.declare(specs)
	for _, t := range specs {
		w.server.AddTool(t.tool(), observe(t.Name, w.tools.handle(t.run())))
	}
}

// close stops the watch and waits for it.
func (w *toolsWatch) close() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}
