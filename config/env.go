package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// applyEnv overrides settings from the environment, read through getenv:
// each setting of Settings from its variable, parsed by the field's type.
// LAKEGATE_DATABASE_URL names one database when LAKEGATE_DATABASES is not
// set.
func (c *Config) applyEnv(getenv func(string) string) error {
	cv := reflect.ValueOf(c).Elem()
	for _, s := range Settings() {
		v := getenv(s.Env)
		if v == "" {
			continue
		}
		if err := setFromEnv(cv.FieldByIndex(s.index), s, v); err != nil {
			return err
		}
	}
	if getenv("LAKEGATE_DATABASES") == "" {
		if v := getenv("LAKEGATE_DATABASE_URL"); v != "" {
			name, err := NameFromURL(v)
			if err != nil {
				return fmt.Errorf("LAKEGATE_DATABASE_URL: %w", err)
			}
			c.Databases = []Database{{Name: name, URL: v}}
		}
	}
	return nil
}

// setFromEnv parses v, the value of s's variable, into the field f. A
// value is read as the config file reads it, and refused in the same
// words (want).
func setFromEnv(f reflect.Value, s Setting, v string) error {
	bad := func() error { return fmt.Errorf("%s=%q: want %s", s.Env, v, want(f.Type())) }
	switch p := f.Addr().Interface().(type) {
	case *string:
		*p = v
	case *bool:
		switch strings.ToLower(v) {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			return bad()
		}
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad()
		}
		*p = n
	case *int64: // the int64 settings count bytes
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad()
		}
		*p = n
	case *float64:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return bad()
		}
		*p = n
	case *Duration:
		d, ok := parseDuration(v)
		if !ok {
			return bad()
		}
		*p = d
	case *[]string:
		*p = splitList(v)
	case *[]Database:
		dbs, err := ParseDatabases(v)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Env, err)
		}
		*p = dbs
	default: // structured settings are JSON, as in a config file
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		fresh := reflect.New(f.Type())
		if err := dec.Decode(fresh.Interface()); err != nil {
			return fmt.Errorf("%s: want a JSON object like %s: %v", s.Env, s.Example, err)
		}
		f.Set(fresh.Elem())
	}
	return nil
}

// want says what a setting of type t takes, for the errors of the file
// and of the environment alike.
func want(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "a duration like 30s or a number of seconds"
	case reflect.TypeFor[int64]():
		return "a whole number of bytes"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number, e.g. 50 or 0.5"
	case reflect.String:
		return "text"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}

// parseDuration reads a Go duration ("30s", "1m30s") or a number of
// seconds ("30", "0.5").
func parseDuration(s string) (Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return Duration(d), true
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, false
	}
	return Duration(time.Duration(n * float64(time.Second))), true
}

// splitList reads "a, b,c" as [a b c].
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ParseDatabases reads "name=url,name=url".
func ParseDatabases(s string) ([]Database, error) {
	var dbs []Database
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&dbs); err != nil {
			// The value is not echoed: it may hold a password.
			return nil, fmt.Errorf(`want name=url,... or a JSON array like [{"name":"iot","url":"postgres://...","read_urls":["postgres://..."]}]: %s`, jsonErrorKind(err))
		}
		return dbs, nil
	}
	i := -1
	for item := range strings.SplitSeq(s, ",") {
		i++
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, u, ok := strings.Cut(item, "=")
		if !ok || name == "" || u == "" {
			// The entry is not echoed: it may hold a password.
			return nil, fmt.Errorf("entry %d: want name=url (e.g. iot=postgres://user@host/iot)", i+1)
		}
		dbs = append(dbs, Database{Name: strings.TrimSpace(name), URL: strings.TrimSpace(u)})
	}
	return dbs, nil
}

// NameFromURL is the last path element of a database URL, without extension:
// postgres://h/iot is "iot"; sqlite:./data/demo.db is "demo".
func NameFromURL(raw string) (string, error) {
	var p string
	if strings.HasPrefix(raw, "sqlite:") {
		p = Database{URL: raw}.SQLitePath()
	} else {
		u, err := url.Parse(raw)
		if err != nil {
			return "", fmt.Errorf("not a valid URL (want postgres://user@host/db or sqlite:PATH)")
		}
		p = u.Path
	}
	name := strings.TrimSuffix(path.Base(filepath.ToSlash(p)), path.Ext(p))
	if name == "" || name == "." || name == "/" {
		return "", fmt.Errorf("URL %q names no database (want .../DBNAME)", redactURL(raw))
	}
	return name, nil
}

// redactURL hides a password in a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// jsonErrorKind says what is wrong with a JSON value without quoting it.
func jsonErrorKind(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	}
	if strings.Contains(err.Error(), "unknown field") {
		return err.Error() // names the field, not its value
	}
	return "not an array of {name, url, read_urls}"
}
