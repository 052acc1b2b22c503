package mcp

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/tools"
)

// An operator edits tools.json in mcp_config_dir while the server runs:
// toolsWatch looks at the file every interval and, when it changed (or
// appeared, or went: then the built-in tools serve), reads it as start-up
// does; SIGHUP and `lakegate admin tools reload` (Plugin.ReloadTools) read
// it at once. A file that does not parse, or declares a statement the
// validator refuses, is refused with the line and the reason, and the
// tools in use stay. A good one replaces them (servers.apply): every
// connected session whose tools changed is told
// notifications/tools/list_changed, and a call of a tool no longer
// declared is an unknown tool.

// DefaultToolsInterval is how often mcp_config_dir's tools.json is looked at.
const DefaultToolsInterval = 2 * time.Second

// toolsWatch reloads the tool declarations when the file changes.
type toolsWatch struct {
	file    string
	builtin []byte
	apply   func(*tools.Declarations)
	log     *slog.Logger

	mu    sync.Mutex // orders reloads
	stamp fileStamp  // of the declarations in use

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
func watchTools(dir string, builtin []byte, apply func(*tools.Declarations), interval time.Duration, log *slog.Logger) *toolsWatch {
	if dir == "" {
		return nil
	}
	w := &toolsWatch{file: filepath.Join(dir, ToolsFile), builtin: builtin, apply: apply, log: log,
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
			_ = w.reload(false)
		}
	}
}

// reload reads the file and applies it: when it changed since the last
// look, or always when forced (an operator's command). A version that was
// refused is not read again by the watch until it changes.
func (w *toolsWatch) reload(force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	stamp, err := stampOf(w.file)
	if err != nil {
		w.log.Error("tools.json not reloaded: the tools in use stay", "file", w.file, "error", err.Error())
		return lakegate.Errorf(lakegate.KindUnavailable, "tools.json not reloaded: %v", err)
	}
	if stamp == w.stamp && !force {
		return nil
	}
	w.stamp = stamp
	d, err := tools.Load(w.builtin, filepath.Dir(w.file), promptNames)
	if err != nil {
		w.log.Error("tools.json not reloaded: the tools in use stay", "file", w.file, "error", err.Error())
		e := lakegate.Errorf(lakegate.KindValidation, "%s", err.Error())
		e.Hint = "the tools in use stay; fix the file and reload again"
		return e
	}
	w.apply(d)
	w.log.Info("tools.json reloaded", "file", d.Source, "tools", len(d.Tools), "groups", len(d.Groups))
	return nil
}

// close stops the watch and waits for it.
func (w *toolsWatch) close() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}
