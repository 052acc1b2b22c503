package transport

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The SDK's Info records are Debug: gone at Info, there at Debug; its
// warnings stay, with the logger's attributes.
func TestSDKLogger(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		want  []string
		not   []string
	}{
		{slog.LevelInfo, []string{`level=WARN msg=trouble app=lakegate`}, []string{"connected"}},
		{slog.LevelDebug, []string{`level=DEBUG msg="server session connected" app=lakegate`, `level=WARN msg=trouble`}, nil},
	} {
		var out bytes.Buffer
		log := SDKLogger(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: c.level})).With("app", "lakegate"))
		log.Info("server session connected")
		log.Warn("trouble")
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("at %v: %q lacks %q", c.level, out.String(), w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("at %v: %q has %q", c.level, out.String(), n)
			}
		}
	}
}
