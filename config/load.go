package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/internal/suggest"
	"gopkg.in/yaml.v3"
)

// Load builds the configuration: defaults, then the config file (file,
// or when it is empty the one LAKEGATE_CONFIG names, if any), then the
// environment read through getenv, then validation.
func Load(file string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if file == "" {
		file = getenv(EnvConfig)
	}
	if file != "" {
		if err := cfg.readFile(file); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func (c *Config) readFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ext := strings.ToLower(filepath.Ext(file))
	lineOf := func(off int64, key string) int { return jsonLine(data, off, key) }
	if ext == ".yaml" || ext == ".yml" {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return fmt.Errorf("config %s: %w", file, err)
		}
		var doc any
		if err := root.Decode(&doc); err != nil {
			return fmt.Errorf("config %s: %w", file, err)
		}
		if doc == nil {
			return nil
		}
		if data, err = json.Marshal(doc); err != nil {
			return fmt.Errorf("config %s: %w", file, err)
		}
		// Offsets would point into the re-encoded JSON: the line is the
		// key's in the YAML.
		lineOf = func(_ int64, key string) int { return yamlLine(&root, key) }
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config %s: %s", file, describeJSONError(err, lineOf))
	}
	return nil
}

// describeJSONError says what is wrong with a setting in the words the
// environment's errors use (see want), with its line (lineOf: 0 when
// unknown) and, for an unknown key, the keys it may have meant.
func describeJSONError(err error, lineOf func(off int64, key string) int) string {
	var (
		se   *json.SyntaxError
		te   *json.UnmarshalTypeError
		line int
	)
	switch {
	case errors.As(err, &se):
		line = lineOf(se.Offset, "")
	case errors.As(err, &te):
		path := te.Field
		key := path[strings.LastIndexByte(path, '.')+1:]
		if line = lineOf(-1, key); line == 0 {
			line = lineOf(te.Offset, "")
		}
		err = fmt.Errorf("setting %q: got %s, want %s", path, te.Value, want(te.Type))
	default:
		if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			key, _ = strconv.Unquote(key)
			line = lineOf(-1, key)
			err = fmt.Errorf("unknown setting %q", key)
			if dym := suggest.DidYouMean(key, settingKeys()); dym != "" {
				err = fmt.Errorf("%w; %s", err, dym)
			}
		}
	}
	if line <= 0 {
		return err.Error()
	}
	return fmt.Sprintf("line %d: %v", line, err)
}

// jsonLine is the line of offset off in data or, when off < 0, of the
// first "key": in it; 0 when neither is found.
func jsonLine(data []byte, off int64, key string) int {
	if off < 0 && key != "" {
		q, _ := json.Marshal(key)
		for i := 0; i < len(data); {
			j := bytes.Index(data[i:], q)
			if j < 0 {
				break
			}
			i += j + len(q)
			if rest := bytes.TrimLeft(data[i:], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
				off = int64(i - len(q))
				break
			}
		}
	}
	if off < 0 {
		return 0
	}
	return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n"))
}

// yamlLine is the line of the first mapping key named key in the YAML
// document under n (depth first), 0 when there is none.
func yamlLine(n *yaml.Node, key string) int {
	if key == "" {
		return 0
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i].Line
			}
		}
	}
	for _, c := range n.Content {
		if line := yamlLine(c, key); line > 0 {
			return line
		}
	}
	return 0
}
