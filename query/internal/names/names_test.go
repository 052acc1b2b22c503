package names

import "testing"

func TestHint(t *testing.T) {
	tests := []struct {
		name  string
		known []string
		want  string
	}{
		{"stauts", []string{"id", "status"}, `did you mean "status"? known columns: id, status`},
		{"zzzzzz", []string{"id", "status"}, "known columns: id, status"},
		{"x", nil, "there are no columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Hint("columns", tt.name, tt.known); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFold(t *testing.T) {
	tests := []struct {
		name  string
		known []string
		want  int
		ok    bool
	}{
		{"STATUS", []string{"id", "status"}, 1, true},
		{"a", []string{"A", "a"}, -1, false},
		{"nope", []string{"id"}, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Fold(tt.name, len(tt.known), func(i int) string { return tt.known[i] })
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
