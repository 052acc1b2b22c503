package query

import "testing"

// A pool's connections make no description cache, which statement
// caching never reads, unless the URL asks for one or for the mode that
// reads it; the statement cache is left as pgx makes it.
func TestPoolConfigCaches(t *testing.T) {
	for _, c := range []struct {
		url              string
		statements, desc int
	}{
		{"postgres://u@h/db", 512, 0},
		{"postgres://u@h/db?description_cache_capacity=64", 512, 64},
		{"postgres://u@h/db?default_query_exec_mode=cache_describe", 512, 512},
		{"postgres://u@h/db?statement_cache_capacity=32", 32, 0},
	} {
		cfg, err := poolConfig("db", c.url, &Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ConnConfig; got.StatementCacheCapacity != c.statements || got.DescriptionCacheCapacity != c.desc {
			t.Errorf("%s: statement cache %d, description cache %d; want %d, %d",
				c.url, got.StatementCacheCapacity, got.DescriptionCacheCapacity, c.statements, c.desc)
		}
	}
}
