package contracts_test

import (
	"testing"

	"github.com/aprqa/apr/contracts"
)

// BenchmarkLoad measures loading and checking the embedded contract set.
func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := contracts.Load(contracts.EmbeddedFS(), "embedded", func(p string) string { return p }); err != nil {
			b.Fatal(err)
		}
	}
}
