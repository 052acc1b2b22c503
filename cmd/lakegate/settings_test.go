package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

// readWhole are the settings read from the Config itself rather than
// through an options constructor: by server.New (the console included)
// and server.NewLimits, which take the whole Config, by config's own
// loading, and by serve's wiring (listener, logger, cluster, tokens).
var readWhole = []string{
	"listen", "databases",
	"jwt_secret", "jwt_public_key_files", "jwt_jwks_url", "jwt_issuer", "jwt_audience", "jwt_roles_claim",
	"authorization_servers", "public_url",
	"tls_cert_file", "tls_key_file", "tls_client_ca_file", "tls_client_cert_auth", "tls_client_cert_roles",
	"cluster_dsn", "cluster_secret", "cluster_advertise_url", "mcp_session_idle_after",
	"rate_limit_rps", "rate_limit_burst", "max_queries_per_subject", "metrics_auth",
	"max_body_bytes", "max_connections", "max_connections_per_address",
	"header_timeout", "read_timeout", "idle_timeout", "drain_timeout", "shutdown_delay",
	"log_format", "log_level", "ignore_env", "gc_headroom",
}

// fromConfig is every options value the binary builds from a Config.
func fromConfig(cfg config.Config) map[string]any {
	return map[string]any{
		"query.Options":          query.OptionsFrom(cfg),
		"mcp.Options":            mcp.OptionsFrom(cfg),
		"blocktransport.Options": mcp.BlockOptions(cfg),
	}
}

// TestSettingsReachOptions changes one setting at a time and fails when
// it reaches no options value: a setting added to Config must be read by
// the OptionsFrom of the package it tunes, or be listed in readWhole.
func TestSettingsReachOptions(t *testing.T) {
	typ := reflect.TypeFor[config.Config]()
	base := fromConfig(config.Default())
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		t.Run(key, func(t *testing.T) {
			cfg := config.Default()
			other(t, reflect.ValueOf(&cfg).Elem().Field(i))
			var reached []string
			for name, opts := range fromConfig(cfg) {
				for _, field := range changed(base[name], opts) {
					reached = append(reached, name+"."+field)
				}
			}
			slices.Sort(reached)
			whole := slices.Contains(readWhole, key)
			switch {
			case len(reached) == 0 && !whole:
				t.Errorf("%s (Config.%s) reaches no options: read it in the OptionsFrom of the package it tunes, "+
					"or list it in readWhole if it is read from the Config itself", key, f.Name)
			case len(reached) > 0 && whole:
				t.Errorf("%s reaches %v: remove it from readWhole", key, reached)
			}
		})
	}
	for _, key := range readWhole {
		if !slices.ContainsFunc(config.Settings(), func(s config.Setting) bool { return s.Key == key }) {
			t.Errorf("readWhole names %s, which is no setting", key)
		}
	}
}

// other sets v to a value unlike the one it holds.
func other(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.5)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("x").Convert(v.Type().Key()), reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	default:
		t.Fatalf("a setting of kind %s: teach other to change it", v.Kind())
	}
}

// changed names the fields of two structs of one type that differ.
func changed(a, b any) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return out
}
