package config

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvConfig names the config file when no --config flag is given.
const EnvConfig = "LAKEGATE_CONFIG"

// envPrefix begins every setting's environment variable.
const envPrefix = "LAKEGATE_"

// Setting is one configuration setting, as Config's field declares it.
type Setting struct {
	// Key is the config file key: the field's json tag.
	Key string
	// Env is the environment variable: envPrefix and Key in upper case.
	Env string
	// Default is the default as shown to people: Default's value ("" when
	// it has none), or the field's default tag where the value is worked
	// out at start.
	Default string
	// Help is the one line serve --help and README show.
	Help string
	// Example, for a structured (JSON) setting, shows its JSON.
	Example string

	index     []int // the field in Config
	described bool  // Default comes from the default tag
}

// Settings returns every setting of Config in declaration order. It is
// the one list the environment is read by and help is written from.
func Settings() []Setting {
	def := reflect.ValueOf(Default())
	typ := def.Type()
	out := make([]Setting, 0, typ.NumField())
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		s := Setting{
			Key:     key,
			Env:     envPrefix + strings.ToUpper(key),
			Help:    f.Tag.Get("help"),
			Example: f.Tag.Get("example"),
			index:   f.Index,
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			s.Default, s.described = d, true
		} else {
			s.Default = formatDefault(def.Field(i))
		}
		out = append(out, s)
	}
	return out
}

// formatDefault writes a default value as a person would type it: "" for
// an empty string or list, durations without zero units ("15m", not
// "15m0s").
func formatDefault(v reflect.Value) string {
	if d, ok := v.Interface().(Duration); ok {
		return formatDuration(time.Duration(d))
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return strings.Join(v.Interface().([]string), ",")
		}
	}
	if v.Len() == 0 { // the remaining kinds are slices and maps
		return ""
	}
	b, _ := json.Marshal(v.Interface())
	return string(b)
}

// formatDuration is d.String() without trailing zero units.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
