package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// TestSQLSuggests: an unknown table, column or function in SQL sent to
// /rest/sql (every format) or the sql command answers a validation error
// whose hint names the close candidates.
func TestSQLSuggests(t *testing.T) {
	st := newStack(t, nil)
	tok := token("r", lakegate.RoleReader)
	cases := []struct{ sql, want string }{
		{"SELECT * FROM reading", `did you mean "readings"?`},
		{"SELECT temperatur FROM readings", `did you mean "temperature"?`},
		{"SELECT lenght(status) FROM readings", `did you mean "length"?`},
	}
	for _, tc := range cases {
		for _, format := range []string{"", "ndjson", "csv"} {
			t.Run("rest "+format+" "+tc.sql, func(t *testing.T) {
				body := strings.Replace(sqlJSON(t, "demo", tc.sql, 0), "{", `{"format":"`+format+`",`, 1)
				if format == "" {
					body = sqlJSON(t, "demo", tc.sql, 0)
				}
				r := st.do(t, "POST", "/rest/sql", tok, body)
				e := r.errBody(t)
				if r.code != http.StatusBadRequest || e.Error.Kind != lakegate.KindValidation || !strings.Contains(e.Error.Hint, tc.want) {
					t.Errorf("got %d %s, want 400 validation_error with %s", r.code, r.body, tc.want)
				}
			})
		}
		t.Run("command "+tc.sql, func(t *testing.T) {
			r := st.do(t, "GET", "/", tok, "", "command", `sql demo format = json "`+tc.sql+`"`)
			e := r.errBody(t)
			if r.code != http.StatusBadRequest || !strings.Contains(e.Error.Hint, tc.want) {
				t.Errorf("got %d %s, want 400 with %s", r.code, r.body, tc.want)
			}
		})
	}
}
