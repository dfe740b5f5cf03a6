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

// serve's falsifiers start apr serve in-process, so they are registered
// here, where the engines are linked.
func init() {
	falsify.Register("serve_responses", falsify.KindShape, serveResponses,
		falsify.Needs(falsify.NeedModel), falsify.Thresholds("violations", "framing_violations"),
		falsify.Doc("apr serve's responses (completion, chat, streamed chunks, error, models, health) carry every field of verb.serve, of its type, and its streams are framed as SSE ending in [DONE]"))
	falsify.Register("serve_parity", falsify.KindProperty, serveParity,
		falsify.Needs(falsify.NeedModel), falsify.Thresholds("mismatches", "max_batch"),
		falsify.Params("backend", "requests", "tokens", "parallel"),
		falsify.Doc("concurrent requests to apr serve give the token ids of the same requests run alone (batch invariance)"))
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

func serveParity(ctx context.Context, c *falsify.Check) error {
	backend, err := c.ParamString("backend", "cpu")
	if err != nil {
		return err
	}
	o := serve.ParityOptions{Model: c.ModelPath(), Backend: backend}
	if o.Requests, err = c.ParamInt("requests", 8); err != nil {
		return err
	}
	if o.Tokens, err = c.ParamInt("tokens", 12); err != nil {
		return err
	}
	if o.Parallel, err = c.ParamInt("parallel", 4); err != nil {
		return err
	}
	res, err := serve.Parity(ctx, o)
	if err != nil {
		return err
	}
	for _, n := range res.Notes {
		c.Note("%s", n)
	}
	c.Measure("mismatches", float64(res.Mismatches))
	c.Measure("max_batch", float64(res.MaxBatch))
	return nil
}
