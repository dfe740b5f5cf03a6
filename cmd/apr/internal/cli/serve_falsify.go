package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"

	"github.com/aprqa/apr/contracts"
	"github.com/aprqa/apr/falsify"
	"github.com/aprqa/apr/schema"
	"github.com/aprqa/apr/serve"
)

// serve_responses checks apr serve's responses against verb.serve with the
// verb field checker, so it is registered here, where that checker is
// (serve_parity is qa's: its serving gate runs it).
func init() {
	falsify.Register("serve_responses", falsify.KindShape, serveResponses,
		falsify.Needs(falsify.NeedModel), falsify.Thresholds("violations", "framing_violations"),
		falsify.Doc("apr serve's responses (completion, chat, streamed chunks, error, models, health) carry every field of verb.serve, of its type, and its streams are framed as SSE ending in [DONE]"))
}

func serveResponses(ctx context.Context, c *falsify.Check) error {
	v, ok := c.Set.Verb("serve")
	if !ok || c.F.Binds != contracts.GroupVerb+".serve" {
		return c.Refuse("binds %s, not verb.serve", c.F.Binds)
	}
	backend, err := c.ParamString("backend", "cpu")
	if err != nil {
		return err
	}
	doc, framing, err := serve.Responses(ctx, serve.Options{Model: c.ModelPath(), Backend: backend, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if _, ok := doc["chat"]; !ok {
		// A model without a chat template answers no chat request: the
		// contract's chat fields are not held against it (and the details
		// say so; nothing about chat passed).
		c.Note("the model has no chat template: the chat responses were not checked")
		nv := *v
		nv.Fields = maps.Clone(v.Fields)
		maps.DeleteFunc(nv.Fields, func(k string, _ schema.Field) bool {
			return strings.HasPrefix(k, "chat.") || strings.HasPrefix(k, "chat_chunks")
		})
		v = &nv
	}
	violations := CheckVerbOutput(v, out)
	for _, s := range append(violations, framing...) {
		c.Note("%s", s)
	}
	c.Measure("violations", float64(len(violations)))
	c.Measure("framing_violations", float64(len(framing)))
	return nil
}
