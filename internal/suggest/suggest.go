// Package suggest finds the names close to a mistyped one, for the
// "did you mean" hints of every unknown name a person or an agent gets:
// settings, tables, columns, functions and tools.
package suggest

import (
	"fmt"
	"sort"
	"strings"
)

// DidYouMean is `did you mean "x" or "y"?` with up to 3 names of known
// close to name (a typo or two away, ignoring case; the closest first),
// or empty when none is.
func DidYouMean(name string, known []string) string {
	close := Close(name, known)
	if len(close) == 0 {
		return ""
	}
	q := make([]string, len(close))
	for i, n := range close {
		q[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("did you mean %s?", strings.Join(q, " or "))
}

// Close returns up to 3 names within a small edit distance of name (a
// third of its length, at most 3), closest first, ignoring case. Only
// names at most one edit further than the closest are kept, so that a
// name one typo away is not drowned by names further off.
func Close(name string, known []string) []string {
	type cand struct {
		name string
		d    int
	}
	limit := min(len([]rune(name))/3+1, 3)
	var cs []cand
	lower := strings.ToLower(name)
	for _, k := range known {
		if d := Distance(lower, strings.ToLower(k)); d <= limit {
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

// Distance is the optimal string alignment distance between a and b, in
// runes: Levenshtein's insertions, deletions and substitutions, plus the
// swap of two adjacent runes ("lenght" for "length"), each one edit.
func Distance(a, b string) int {
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
