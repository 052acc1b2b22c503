package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lakegate/lakegate/internal/suggest"
)

// otherEnv are the LAKEGATE_* variables that are not settings but are
// read at start: the config file's name and the one-database shorthand.
var otherEnv = []string{EnvConfig, "LAKEGATE_DATABASE_URL"}

// CheckEnviron refuses the LAKEGATE_* variables of environ (as
// os.Environ gives it) that lakegate does not read, so that a misspelled
// setting stops start-up instead of being ignored: the error names each,
// with the variables it may have meant. also are more variables the
// caller reads (a client's LAKEGATE_SERVER); ignore, the ignore_env
// setting, names variables to let pass (a name, or a prefix ending in *),
// for tools that share the prefix.
func CheckEnviron(environ, ignore []string, also ...string) error {
	known := append(append([]string{}, otherEnv...), also...)
	for _, s := range Settings() {
		known = append(known, s.Env)
	}
	var bad []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) || ignored(name, ignore) {
			continue
		}
		msg := name
		if dym := suggest.DidYouMean(name, known); dym != "" {
			msg += " (" + dym + ")"
		}
		bad = append(bad, msg)
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("unknown environment variable %s: no setting has that name (see lakegate serve --help; "+
		"to let variables of other tools pass, name them in ignore_env, e.g. LAKEGATE_IGNORE_ENV='LAKEGATE_MYTOOL_*')",
		strings.Join(bad, ", "))
}

// ignored reports whether ignore names name, or a prefix of it with *.
func ignored(name string, ignore []string) bool {
	for _, p := range ignore {
		if pre, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, pre) || p == name {
			return true
		}
	}
	return false
}
