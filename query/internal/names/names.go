// Package names matches a name a caller gave against the names that
// exist (exact, ignoring case, or a typo or two away through package
// suggest) and words the hint of an unknown name.
//
// It is pure (no I/O) and imports nothing of lakegate's but suggest.
package names

import (
	"fmt"
	"strings"

	"github.com/lakegate/lakegate/internal/suggest"
)

// Fold returns the only index i < n whose name at(i) equals name ignoring
// case.
func Fold(name string, n int, at func(int) string) (int, bool) {
	found := -1
	for i := range n {
		if strings.EqualFold(at(i), name) {
			if found >= 0 {
				return -1, false
			}
			found = i
		}
	}
	return found, found >= 0
}

// Hint lists close matches of name among known, then the known names
// (what they are: "columns", "tables"...).
func Hint(what, name string, known []string) string {
	var b strings.Builder
	if dym := suggest.DidYouMean(name, known); dym != "" {
		b.WriteString(dym + " ")
	}
	switch {
	case len(known) == 0:
		fmt.Fprintf(&b, "there are no %s", what)
	case len(known) <= 30:
		fmt.Fprintf(&b, "known %s: %s", what, strings.Join(known, ", "))
	default:
		fmt.Fprintf(&b, "%d %s are known; list them first", len(known), what)
	}
	return b.String()
}

// Quote is names quoted and joined with " or ".
func Quote(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, " or ")
}
