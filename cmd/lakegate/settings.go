package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/lakegate/lakegate/config"
)

// clientEnv are the LAKEGATE_* variables the client commands (admin,
// fetch) read; they are no server setting.
var clientEnv = []string{"LAKEGATE_SERVER", "LAKEGATE_TOKEN"}

// writeSettings lists every setting for serve --help: its file key,
// environment variable, default and meaning.
func writeSettings(w io.Writer) {
	fmt.Fprintf(w, "\nSettings: a config file (--config, or %s; JSON or YAML) holds any of these keys,\n"+
		"LAKEGATE_* environment variables override it, and --listen overrides both.\n\n", config.EnvConfig)
	for _, s := range config.Settings() {
		def := s.Default
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  %s, %s (default: %s)\n      %s\n", s.Key, s.Env, def, s.Help)
	}
}

// loadConfig reads the configuration from file and environ, refusing
// LAKEGATE_* variables that name nothing lakegate reads.
func loadConfig(file string, environ []string) (config.Config, error) {
	cfg, err := config.Load(file, lookupEnv(environ))
	if err != nil {
		return config.Config{}, err
	}
	if err := config.CheckEnviron(environ, cfg.IgnoreEnv, clientEnv...); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// lookupEnv reads environ as os.Getenv reads the process's: the last
// value of a name wins.
func lookupEnv(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
