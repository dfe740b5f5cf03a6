package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/engine/gguf"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/ladder"
)

func TestContractsGate(t *testing.T) {
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	good := testutil.Fixture(t, "models/stories260K.gguf")
	// A copy of stories260K with one hyper-parameter missing.
	f, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	for _, kv := range f.KV {
		if kv.Key != "llama.embedding_length" {
			b.Set(kv.Key, kv.Value)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := b.WriteFile(bad); err != nil {
		t.Fatal(err)
	}
	gate := contractsGate(set)
	if r := gate(&ladder.Model{Key: "good", Path: good}, "run", "ref"); r != nil {
		t.Errorf("gate(stories260K) = %v, want no refusal", r)
	}
	r := gate(&ladder.Model{Key: "bad", Path: bad}, "run", "ref")
	if r == nil || r.By != "model.llama" || !strings.Contains(r.Reason, "llama.embedding_length") {
		t.Errorf("gate(model without embedding_length) = %v, want a refusal by model.llama naming the key", r)
	}
	digest, _, err := ladderContracts()
	if err != nil || digest != set.Digest() {
		t.Errorf("ladderContracts() digest %q, %v; want the embedded digest", digest, err)
	}
}
