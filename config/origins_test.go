package config

import (
	"slices"
	"testing"
)

func TestMCPAllowedOrigins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string
		want    []string
		wantErr bool
	}{
		{"unset", "", nil, false},
		{"list", " https://a.example.com, http://localhost:5173 ,", []string{"https://a.example.com", "http://localhost:5173"}, false},
		{"any", "*", []string{"*"}, false},
		{"not an origin", "a.example.com", nil, true},
		{"with a path", "https://a.example.com/x", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load("", func(k string) string {
				if k == "LAKEGATE_MCP_ALLOWED_ORIGINS" {
					return tc.env
				}
				return ""
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && !slices.Equal(cfg.MCPAllowedOrigins, tc.want) {
				t.Errorf("got %v, want %v", cfg.MCPAllowedOrigins, tc.want)
			}
		})
	}
}
