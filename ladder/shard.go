package ladder

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxShards bounds N in K/N: more shards than this is a typo, not a fleet.
const MaxShards = 1024

// Shard is the K-th of N slices of a universe (1 ≤ K ≤ N).
type Shard struct{ K, N int }

// All is the whole universe as one shard.
var All = Shard{1, 1}

// ParseShard reads "K/N".
func ParseShard(s string) (Shard, error) {
	ks, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want K/N, e.g. 2/3", s)
	}
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: K and N must be integers", s)
	}
	sh := Shard{k, n}
	return sh, sh.Valid()
}

// Valid reports whether 1 ≤ K ≤ N ≤ MaxShards.
func (s Shard) Valid() error {
	if s.N < 1 || s.N > MaxShards {
		return fmt.Errorf("shard %d/%d: N must be in [1, %d]", s.K, s.N, MaxShards)
	}
	if s.K < 1 || s.K > s.N {
		return fmt.Errorf("shard %d/%d: K must be in [1, N]", s.K, s.N)
	}
	return nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.K, s.N) }

// AssignShards returns, for each model (in the given order), the shard
// (1..n) that runs its cells. Whole models go to one shard, so each shard
// keeps a model resident once. The assignment balances bytes (largest model
// first, to the least-loaded shard; ties by key, then by lower shard): it
// depends only on model keys and sizes, so every machine that sees the same
// files computes the same slices.
func AssignShards(models []*Model, n int) []int {
	order := make([]int, len(models))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(models[b].Bytes, models[a].Bytes); c != 0 {
			return c
		}
		return cmp.Compare(models[a].Key, models[b].Key)
	})
	load := make([]int64, n)
	count := make([]int, n)
	out := make([]int, len(models))
	for _, i := range order {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] || load[s] == load[best] && count[s] < count[best] {
				best = s
			}
		}
		load[best] += max(models[i].Bytes, 1)
		count[best]++
		out[i] = best + 1
	}
	return out
}

// Matrix returns the shard names "1/n" … "n/n".
func Matrix(n int) ([]string, error) {
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("shards: %d is not in [1, %d]", n, MaxShards)
	}
	out := make([]string, n)
	for k := range n {
		out[k] = Shard{k + 1, n}.String()
	}
	return out, nil
}
