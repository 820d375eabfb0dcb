package config

import (
	"slices"
	"strings"
)

// maxSuggestions bounds the keys an UnknownKeyError suggests.
const maxSuggestions = 3

// suggest returns the registered keys closest to an unknown key: those at the
// smallest edit distance, if it is small for the key's length, and otherwise
// keys that extend it or end with it (so "checkpointing.interval" finds
// "execution.checkpointing.interval"). A close deprecated key is suggested as
// the key that replaced it. Comparison ignores case.
func suggest(key string) []string {
	k := strings.ToLower(key)
	if k == "" {
		return nil
	}
	limit := max(2, len(k)/5)

	type candidate struct {
		key  string // the registered key to suggest
		dist int
	}
	var cands []candidate
	consider := func(name string, o *option) {
		if d := editDistance(k, strings.ToLower(name)); d <= limit {
			cands = append(cands, candidate{o.key, d})
		}
	}
	for _, o := range registry.sorted {
		consider(o.key, o)
		for _, a := range o.deprecated {
			consider(a, o)
		}
	}
	if len(cands) > 0 {
		slices.SortStableFunc(cands, func(a, b candidate) int { return a.dist - b.dist })
		var out []string
		for _, c := range cands {
			if c.dist > cands[0].dist || len(out) == maxSuggestions {
				break
			}
			if !slices.Contains(out, c.key) {
				out = append(out, c.key)
			}
		}
		return out
	}

	var out []string
	for _, o := range registry.sorted {
		name := strings.ToLower(o.key)
		if strings.HasSuffix(name, "."+k) || (len(k) >= 4 && strings.HasPrefix(name, k)) ||
			strings.HasPrefix(k, name+".") {
			out = append(out, o.key)
			if len(out) == maxSuggestions {
				break
			}
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
