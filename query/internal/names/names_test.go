package names

import (
	"reflect"
	"testing"
)

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"readings", "reading", 1},
		{"devcies", "devices", 1}, {"héllo", "hello", 1}, {"lenght", "length", 1},
		{"ab", "ba", 1}, {"ca", "abc", 3}, {"abcd", "badc", 2},
	}
	for _, tt := range tests {
		t.Run(tt.a+"/"+tt.b, func(t *testing.T) {
			if got := editDistance(tt.a, tt.b); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClose(t *testing.T) {
	known := []string{"temperature", "humidity", "ts", "status", "note", "id"}
	tests := []struct {
		name string
		want []string
	}{
		{"temprature", []string{"temperature"}},
		{"Status", []string{"status"}},
		{"ix", []string{"id"}},
		{"humidty", []string{"humidity"}},
		{"zzzzzzzz", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Close(tt.name, known); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
