package persistence

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// The tree keeps every inserted key, in order, whatever the insertion
// pattern (ascending like the service's ids, descending, random, clustered
// under a few prefixes), through enough splits for three levels; positions
// found by seekGE and seekLT, and walks in both directions, agree with a
// sorted slice.
func TestOvTreeAgainstSortedSlice(t *testing.T) {
	patterns := map[string]func(rng *rand.Rand, i int) string{
		"ascending":  func(_ *rand.Rand, i int) string { return fmt.Sprintf("spd_%08d", i) },
		"descending": func(_ *rand.Rand, i int) string { return fmt.Sprintf("k%08d", 1e7-i) },
		"random":     func(rng *rand.Rand, _ int) string { return fmt.Sprintf("%x", rng.Uint64()) },
		"clustered": func(rng *rand.Rand, i int) string {
			return fmt.Sprintf("agt_%02d|spd_%08d", rng.IntN(40), i)
		},
		"mostly ascending": func(rng *rand.Rand, i int) string {
			return fmt.Sprintf("evt_%08d", i+rng.IntN(50)-25)
		},
	}
	for name, gen := range patterns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(name))))
			var tree ovTree
			seen := map[string]bool{}
			var want []string
			for i := range 9000 {
				k := gen(rng, i)
				if seen[k] {
					continue
				}
				seen[k] = true
				want = append(want, k)
				tree.insert(&ovNode{key: k})
			}
			sort.Strings(want)
			if depth := treeDepth(tree.root); depth < 3 {
				t.Fatalf("tree of %d keys has depth %d; the test wants inner splits", len(want), depth)
			}
			var fwd, rev []string
			for p := tree.first(); p.ok(); p = tree.next(p) {
				if p.entry().key != p.key() {
					t.Fatalf("entry %q under key %q", p.entry().key, p.key())
				}
				fwd = append(fwd, p.key())
			}
			for p := tree.lastPos(); p.ok(); p = tree.prev(p) {
				rev = append(rev, p.key())
			}
			slices.Reverse(rev)
			if !slices.Equal(fwd, want) || !slices.Equal(rev, want) || tree.size != len(want) {
				t.Fatalf("walks: forward %d keys, backward %d, size %d, want %d", len(fwd), len(rev), tree.size, len(want))
			}
			probes := []string{"", "\xff", want[0], want[len(want)-1]}
			for range 500 {
				k := want[rng.IntN(len(want))]
				probes = append(probes, k, k+"\x00", k[:len(k)-1])
			}
			for _, k := range probes {
				i := sort.SearchStrings(want, k)
				if p := tree.seekGE(k); p.ok() != (i < len(want)) || p.ok() && p.key() != want[i] {
					t.Fatalf("seekGE(%q): %v, want index %d", k, p, i)
				}
				if p := tree.seekLT(k); p.ok() != (i > 0) || p.ok() && p.key() != want[i-1] {
					t.Fatalf("seekLT(%q): %v, want index %d", k, p, i-1)
				}
			}
		})
	}
}

func treeDepth(n *treeNode) int {
	if n == nil {
		return 0
	}
	if n.kids == nil {
		return 1
	}
	return 1 + treeDepth(n.kids[0])
}

// An empty tree has no positions.
func TestOvTreeEmpty(t *testing.T) {
	var tree ovTree
	if tree.first().ok() || tree.lastPos().ok() || tree.seekGE("a").ok() || tree.seekLT("a").ok() {
		t.Fatal("a position in an empty tree")
	}
}
