package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/internal/testutil"
	"github.com/aprqa/apr/serve"
)

// TestServeResponsesCatchesAMissingField: verb.serve's field check fails on
// a response document with a field left out (the check can fail).
func TestServeResponsesCatchesAMissingField(t *testing.T) {
	model := testutil.Fixture(t, "models/synth/qwen2-tiny-Q8_0.gguf")
	set, err := contracts.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := set.Verb("serve")
	if !ok {
		t.Fatal("no verb.serve contract")
	}
	doc, framing, err := serve.Responses(context.Background(), serve.Options{Model: model, Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(doc)
	if bad := falsify.CheckVerbOutput(v, good); len(bad) > 0 || len(framing) > 0 {
		t.Fatalf("the real responses violate verb.serve: %q %q", bad, framing)
	}
	delete(doc["completion"].(map[string]any)["usage"].(map[string]any), "completion_tokens")
	doc["chat"].(map[string]any)["created"] = "yesterday"
	broken, _ := json.Marshal(doc)
	bad := falsify.CheckVerbOutput(v, broken)
	if len(bad) != 2 {
		t.Errorf("a missing and a mistyped field: violations %q, want 2", bad)
	}
}
