// Package names matches a name a caller gave against the names that
// exist: exact, ignoring case, or a typo or two away, and words the hint
// of an unknown name.
//
// It is pure (no I/O) and imports nothing of lakegate's.
package names

import (
	"fmt"
	"sort"
	"strings"
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

// Close returns up to 3 names within a small edit distance of name,
// closest first, ignoring case. Only names at most one edit further than
// the closest are kept, so that a name one typo away is not drowned by
// names further off.
func Close(name string, known []string) []string {
	type cand struct {
		name string
		d    int
	}
	max := len([]rune(name))/3 + 1
	if max > 3 {
		max = 3
	}
	var cs []cand
	lower := strings.ToLower(name)
	for _, k := range known {
		if d := editDistance(lower, strings.ToLower(k)); d <= max {
			cs = append(cs, cand{k, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for i := 0; i < len(cs) && i < 3 && cs[i].d <= cs[0].d+1; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the optimal string alignment distance between a and b,
// in runes: Levenshtein's insertions, deletions and substitutions, plus
// the swap of two adjacent runes ("lenght" for "length"), each one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: i-2, i-1 and i.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// DidYouMean is `did you mean "x" or "y"?` with up to 3 names of known
// close to name (see Close), or empty when none is.
func DidYouMean(name string, known []string) string {
	close := Close(name, known)
	if len(close) == 0 {
		return ""
	}
	return fmt.Sprintf("did you mean %s?", Quote(close))
}

// Hint lists close matches of name among known, then the known names
// (what they are: "columns", "tables"...).
func Hint(what, name string, known []string) string {
	var b strings.Builder
	if dym := DidYouMean(name, known); dym != "" {
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
