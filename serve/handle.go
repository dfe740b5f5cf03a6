package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aprqa/apr/engine/generate"
	"github.com/aprqa/apr/engine/tokenizer"
)

// completion answers /v1/chat/completions (chat) and /v1/completions.
func (s *Server) completion(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, sch, ctxLen, status := s.ready()
		if status != "" {
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "the model is not ready: " + status})
			return
		}
		body, aerr := s.readBody(w, r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		req, aerr := decodeRequest(body, chat)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if req.Model != "" && req.Model != s.o.Name {
			writeError(w, s.modelNotFound(req.Model))
			return
		}
		// Tools need a template that shows them to the model in a format
		// whose calls apr reads back (tools.go).
		var format toolFormat
		if len(req.Tools) > 0 && m.Tmpl != nil {
			switch format = templateToolFormat(m.Tmpl.Source()); format {
			case toolsNone:
				writeError(w, badRequest("tools", "field tools: this model's chat template renders no tools"))
				return
			case toolsOther:
				writeError(w, badRequest("tools", "field tools: this model's chat template teaches a tool-call format apr serve does not read (it reads Hermes JSON and Qwen XML <tool_call> blocks, Llama 3.1 and Mistral replies)"))
				return
			}
		}
		// A forced call (tool_choice): its start ends the prompt, the
		// completion is held to one JSON object (the arguments), and its
		// end closes the text the splitter reads.
		var forceIDs []int32
		var forceText, forceEnd string
		var forceLeads []string
		if len(req.ForceTools) > 0 && m.Tmpl != nil {
			start, text, end, leads, ok := forcedCall(format, req.ForceTools)
			if !ok {
				writeError(w, badRequest("tool_choice", "field tool_choice: this model's tool-call format (Qwen's XML) has no JSON arguments that apr serve could hold the model to; send \"auto\""))
				return
			}
			var err error
			if forceIDs, err = m.Tok.Encode(start, tokenizer.Options{ParseSpecial: true}); err != nil {
				writeError(w, badRequest("tool_choice", "tokenizing the forced call's start: %v", err))
				return
			}
			forceText, forceEnd, forceLeads = text, end, leads
		}
		if err := req.Sampling.CheckVocab(m.Spec.NVocab); err != nil {
			writeError(w, badRequest("logit_bias", "field logit_bias: %v", err))
			return
		}
		// The prompts: the chat's one, or each of /v1/completions' (a text or
		// token ids, or a list of them: OpenAI's batch form, whose items are
		// named prompt[k]); each must fit the context with its max_tokens.
		var prompts [][]int32
		var maxTokens []int
		items := req.Prompts
		if chat {
			items = []promptItem{{}} // the messages, rendered below
		}
		for k, it := range items {
			at := "prompt"
			switch {
			case chat:
				at = "messages"
			case req.Batch:
				at = fmt.Sprintf("prompt[%d]", k)
			}
			prompt := it.IDs
			var err error
			switch {
			case chat && m.Tmpl == nil:
				writeError(w, badRequest(at, "this model has no usable chat template (%v): use /v1/completions", m.TmplErr))
				return
			case chat:
				if prompt, err = generate.MessagesTokens(r.Context(), m.Tok, m.Tmpl, req.chatInput()); err != nil {
					writeError(w, badRequest(at, "rendering the chat template: %v", err))
					return
				}
				prompt = append(prompt, forceIDs...)
			case it.IDs != nil:
				for i, id := range it.IDs {
					if id < 0 || int(id) >= m.Spec.NVocab {
						writeError(w, badRequest(fmt.Sprintf("%s[%d]", at, i), "field %s[%d]: token %d is not in the vocabulary of %d tokens", at, i, id, m.Spec.NVocab))
						return
					}
				}
			default:
				if prompt, err = generate.PromptTokens(r.Context(), m.Tok, nil, it.Text, true); err != nil {
					writeError(w, badRequest(at, "tokenizing %s: %v", at, err))
					return
				}
			}
			switch {
			case len(prompt) == 0:
				writeError(w, badRequest(at, "the prompt is empty after tokenization"))
				return
			case len(prompt) > ctxLen:
				writeError(w, badRequest(at, "the prompt has %d tokens, longer than the context of %d", len(prompt), ctxLen))
				return
			}
			room := ctxLen - len(prompt) + 1 // the last sampled token is never fed
			n := req.MaxTokens
			switch {
			case req.ScoreOnly:
				n = 0
			case n == 0:
				n = room
			case n > room:
				maxParam := "max_tokens"
				if chat {
					maxParam = "max_completion_tokens"
				}
				writeError(w, badRequest(maxParam, "%s has %d tokens and %d new ones were asked for: more than the context of %d allows (at most %d new)",
					at, len(prompt), n, ctxLen, room))
				return
			}
			prompts, maxTokens = append(prompts, prompt), append(maxTokens, n)
		}
		var think, thinkIn bool
		// The reasoning is split off a chat reply where the template
		// teaches <think> and the reply is free text (not held to JSON);
		// the reply starts inside it when the prompt left it open.
		if chat && !req.RawThinking && !req.JSON && forceText == "" && m.Tmpl != nil && templateThinks(m.Tmpl.Source()) {
			p := prompts[0]
			tail, err := m.Tok.Decode(p[max(0, len(p)-thinkTail):])
			if err != nil {
				writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()})
				return
			}
			think, thinkIn = true, promptThinks(string(tail))
		}
		// n choices of each prompt: a sequence each, choice c sampling with
		// seed + c (the same draws as a request for one choice with that
		// seed), at index k·n + c as OpenAI numbers them; they run side by
		// side in the slots as separate requests would.
		jobs := make([]*job, 0, len(prompts)*req.N)
		for k, prompt := range prompts {
			for c := range req.N {
				p := req.Sampling
				p.Seed += uint64(c)
				j := &job{ctx: r.Context(), prompt: prompt, stop: req.Stop, logprobs: req.Logprobs, top: req.TopLogprobs,
					opts: generate.SeqOptions{MaxTokens: maxTokens[k], IgnoreEOS: req.IgnoreEOS, Sampling: p, SkipControl: true, JSON: req.JSON || forceText != "", JSONAfter: forceLeads}}
				if req.Echo {
					j.echoPrompt(m.Tok)
				}
				// One call allowed: the reply ends with its first <tool_call>
				// block (a forced call is one; Llama 3.1's reply is one call;
				// Mistral's list is read whole).
				if req.OneCall && forceText == "" && len(req.ToolDefs) > 0 && (format == toolsHermes || format == toolsXML) {
					j.stopAfter = callClose
				}
				if err := sch.submit(j); err != nil { // the ones submitted stop with the request's context
					if errors.Is(err, errQueueFull) {
						w.Header().Set("Retry-After", "1")
					}
					writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Message: err.Error()})
					return
				}
				jobs = append(jobs, j)
			}
		}
		rs := &responder{s: s, chat: chat, req: req, id: newID(map[bool]string{true: "chatcmpl-", false: "cmpl-"}[chat]), created: time.Now().Unix(), format: format,
			forceText: forceText, forceEnd: forceEnd, think: think, thinkIn: thinkIn}
		if req.Stream {
			rs.stream(w, r, jobs)
		} else {
			rs.whole(w, r, jobs)
		}
	}
}

type responder struct {
	s       *Server
	chat    bool
	req     *request
	id      string
	created int64
	format  toolFormat // the template's tool-call format when tools were sent
	// A forced call's text before the completion and after it (when the
	// completion, the arguments, ended as a whole object).
	forceText, forceEnd string
	// think: the reply's reasoning is split off (reasoning.go); thinkIn:
	// the prompt left the reply inside it.
	think, thinkIn bool
}

// replySplitter separates a chat reply's text into its reasoning
// (reasoning.go), its content and its tool calls (tools.go), as the text
// arrives: the calls are read from the content only.
type replySplitter struct {
	think    *thinkSplitter // nil: no reasoning is split off
	call     *callSplitter  // nil: no tools were sent
	forceEnd string         // a forced call's end (responder.forceEnd)
}

// splitter returns a choice's reply splitter, or nil when its text is all
// content (no tools were sent and no reasoning is split off).
func (rs *responder) splitter() *replySplitter {
	sp := &replySplitter{forceEnd: rs.forceEnd}
	if rs.think {
		sp.think = newThinkSplitter(rs.thinkIn)
	}
	if len(rs.req.ToolDefs) > 0 && rs.format >= toolsHermes {
		sp.call = &callSplitter{format: rs.format, tools: rs.req.ToolDefs}
		sp.call.feed(rs.forceText) // the call's start: held, it passes nothing on
	}
	if sp.think == nil && sp.call == nil {
		return nil
	}
	return sp
}

// feed takes the next text of the reply and returns what it completes.
func (sp *replySplitter) feed(text string) (reasoning, content string, calls []toolCall) {
	content = text
	if sp.think != nil {
		reasoning, content = sp.think.feed(text)
	}
	if sp.call != nil && content != "" {
		content, calls = sp.call.feed(content)
	}
	return reasoning, content, calls
}

// finish ends the reply: what the reasoning splitter holds, a forced
// call's end when the completion stopped on its own (the arguments'
// object closed), then what the call splitter holds.
func (sp *replySplitter) finish(finish string) (reasoning, content string, calls []toolCall) {
	if sp.think != nil {
		reasoning, content = sp.think.finish()
	}
	if sp.call == nil {
		return reasoning, content, nil
	}
	if content != "" {
		content, calls = sp.call.feed(content)
	}
	if sp.forceEnd != "" && finish == generate.FinishStop {
		c, more := sp.call.feed(sp.forceEnd)
		content, calls = content+c, append(calls, more...)
	}
	rest, more := sp.call.finish()
	return reasoning, content + rest, append(calls, more...)
}

// calls is how many calls the reply has made so far.
func (sp *replySplitter) calls() int {
	if sp.call == nil {
		return 0
	}
	return sp.call.calls
}

// toolCalls renders calls as OpenAI's tool_calls, numbered from first (a
// stream's delta carries each call's index among the choice's calls).
func (rs *responder) toolCalls(calls []toolCall, first int, stream bool) []any {
	out := make([]any, len(calls))
	for k, c := range calls {
		tc := map[string]any{"id": callID(rs.format), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		if stream {
			tc["index"] = first + k
		}
		out[k] = tc
	}
	return out
}

// finishReason is "tool_calls" for a choice that stopped after calling.
func finishReason(finish string, calls int) string {
	if calls > 0 && finish == generate.FinishStop {
		return "tool_calls"
	}
	return finish
}

// whole waits for every choice's end and writes one response: the
// choices in order, the prompt's tokens counted once in the usage.
func (rs *responder) whole(w http.ResponseWriter, r *http.Request, jobs []*job) {
	choices := make([]any, len(jobs))
	var u usage
	for i, j := range jobs {
		var text []byte
		var ids []int32
		var lps []tokenLogprob
		echoed := false
		for {
			var ev event
			select {
			case ev = <-j.events:
			case <-r.Context().Done():
				return // the scheduler stops the sequences before their next pass
			}
			if ev.Err != nil {
				writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: ev.Err.Error()})
				return
			}
			if j.echo && !echoed { // the first event: the prompt was evaluated
				echoed = true
				text = []byte(j.echoed())
				lps = append(lps, j.promptLps...)
			}
			text = append(text, ev.Text...)
			ids = append(ids, ev.IDs...)
			lps = append(lps, ev.Logprobs...)
			if ev.Finish == "" {
				continue
			}
			choice := map[string]any{"index": i, "finish_reason": ev.Finish, "token_ids": ids, "logprobs": rs.logprobs(lps, 0)}
			if sp := rs.splitter(); sp != nil {
				reasoning, content, calls := sp.feed(string(text))
				r2, rest, more := sp.finish(ev.Finish)
				reasoning, content, calls = reasoning+r2, content+rest, append(calls, more...)
				msg := map[string]any{"role": "assistant", "content": content}
				if reasoning != "" {
					msg["reasoning_content"] = reasoning
				}
				if len(calls) > 0 {
					msg["tool_calls"] = rs.toolCalls(calls, 0, false)
					if content == "" {
						msg["content"] = nil
					}
				}
				choice["message"] = msg
				choice["finish_reason"] = finishReason(ev.Finish, len(calls))
			} else if rs.chat {
				choice["message"] = map[string]any{"role": "assistant", "content": string(text)}
			} else {
				choice["text"] = string(text)
			}
			choices[i] = choice
			u = rs.addUsage(u, i, ev.Usage)
			break
		}
	}
	obj := "text_completion"
	if rs.chat {
		obj = "chat.completion"
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": rs.id, "object": obj, "created": rs.created, "model": rs.s.o.Name,
		"system_fingerprint": "apr-" + rs.s.o.Backend, "choices": choices, "usage": u})
}

// stream writes one SSE chunk per delta of any choice (each carries its
// index), a final chunk with each choice's finish reason, a usage chunk
// when asked (after every choice finished), then [DONE].
func (rs *responder) stream(w http.ResponseWriter, r *http.Request, jobs []*job) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	obj := "text_completion"
	if rs.chat {
		obj = "chat.completion.chunk"
	}
	chunk := func(choices []any) map[string]any {
		return map[string]any{"id": rs.id, "object": obj, "created": rs.created, "model": rs.s.o.Name,
			"system_fingerprint": "apr-" + rs.s.o.Backend, "choices": choices}
	}
	if rs.chat {
		for i := range jobs {
			if !send(chunk([]any{map[string]any{"index": i, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}})) {
				return
			}
		}
	}
	// The choices' events, in the order they come.
	type tagged struct {
		i  int
		ev event
	}
	merged := make(chan tagged)
	for i, j := range jobs {
		go func() {
			for {
				var ev event
				select {
				case ev = <-j.events:
				case <-r.Context().Done():
					return
				}
				select {
				case merged <- tagged{i, ev}:
				case <-r.Context().Done():
					return
				}
				if ev.Finish != "" || ev.Err != nil {
					return
				}
			}
		}()
	}
	offset := make([]int, len(jobs))
	echoed := make([]bool, len(jobs))
	splitters := make([]*replySplitter, len(jobs))
	for i := range jobs {
		splitters[i] = rs.splitter()
	}
	var u usage
	for left := len(jobs); left > 0; {
		var t tagged
		select {
		case t = <-merged:
		case <-r.Context().Done():
			return
		}
		i, j, ev := t.i, jobs[t.i], t.ev
		if ev.Err != nil {
			send(map[string]any{"error": &apiError{Type: "server_error", Message: ev.Err.Error()}})
			return
		}
		if j.echo && !echoed[i] { // the first event: the prompt was evaluated; it goes first
			echoed[i] = true
			text := j.echoed()
			if !send(chunk([]any{map[string]any{"index": i, "text": text, "token_ids": []int32{}, "logprobs": rs.logprobs(j.promptLps, 0), "finish_reason": nil}})) {
				return
			}
			offset[i] += len(text)
		}
		// One chunk per sampled token, even when the token adds no text yet
		// (a control token, half a character, the start of a stop
		// string): clients see every token when it is sampled.
		sp := splitters[i]
		if ev.Text != "" || len(ev.IDs) > 0 || len(ev.Logprobs) > 0 {
			c := map[string]any{"index": i, "token_ids": ev.IDs, "logprobs": rs.logprobs(ev.Logprobs, offset[i]), "finish_reason": nil}
			if sp != nil {
				// Text that may open a call or a reasoning block's end is
				// held until it does or cannot.
				before := sp.calls()
				reasoning, content, calls := sp.feed(ev.Text)
				delta := map[string]any{"content": content}
				if reasoning != "" {
					delta["reasoning_content"] = reasoning
				}
				if len(calls) > 0 {
					delta["tool_calls"] = rs.toolCalls(calls, before, true)
				}
				c["delta"] = delta
			} else if rs.chat {
				c["delta"] = map[string]any{"content": ev.Text}
			} else {
				c["text"] = ev.Text
			}
			if !send(chunk([]any{c})) {
				return
			}
			offset[i] += len(ev.Text)
		}
		if ev.Finish == "" {
			continue
		}
		c := map[string]any{"index": i, "token_ids": []int32{}, "logprobs": nil, "finish_reason": ev.Finish}
		if sp != nil {
			// What was held (an unclosed call is the model's text) goes with
			// the finish.
			before := sp.calls()
			delta := map[string]any{}
			reasoning, rest, calls := sp.finish(ev.Finish)
			if reasoning != "" {
				delta["reasoning_content"] = reasoning
			}
			if rest != "" {
				delta["content"] = rest
			}
			if len(calls) > 0 {
				delta["tool_calls"] = rs.toolCalls(calls, before, true)
			}
			c["delta"] = delta
			c["finish_reason"] = finishReason(ev.Finish, sp.calls())
		} else if rs.chat {
			c["delta"] = map[string]any{}
		} else {
			c["text"] = ""
		}
		if !send(chunk([]any{c})) {
			return
		}
		u = rs.addUsage(u, i, ev.Usage)
		left--
	}
	if rs.req.IncludeUsage {
		uc := chunk([]any{})
		uc["usage"] = u
		if !send(uc) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// addUsage adds choice i's usage to u: its completion tokens, and its
// prompt's tokens (and the cached ones) once per prompt, with its first
// choice (choices k·n … k·n + n − 1 share prompt k).
func (rs *responder) addUsage(u usage, i int, c usage) usage {
	if i%rs.req.N == 0 {
		u.PromptTokens += c.PromptTokens
		u.Details.CachedTokens += c.Details.CachedTokens
	}
	u.CompletionTokens += c.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// logprobs renders lps in the route's shape (nil when none were asked).
func (rs *responder) logprobs(lps []tokenLogprob, offset int) any {
	if !rs.req.Logprobs {
		return nil
	}
	if rs.chat {
		content := make([]any, 0, len(lps))
		for _, lp := range lps {
			top := make([]any, 0, len(lp.Top))
			for _, a := range lp.Top {
				top = append(top, map[string]any{"token": a.Token, "logprob": a.Logprob, "bytes": byteInts(a.Bytes)})
			}
			content = append(content, map[string]any{"token": lp.Token, "logprob": lp.Logprob, "bytes": byteInts(lp.Bytes), "top_logprobs": top})
		}
		return map[string]any{"content": content}
	}
	out := map[string]any{"tokens": []string{}, "token_logprobs": []any{}, "top_logprobs": []any{}, "text_offset": []int{}}
	var toks []string
	var lp []any
	var top []any
	var offs []int
	for _, t := range lps {
		toks = append(toks, t.Token)
		if t.None { // the echoed prompt's first token: null, as OpenAI's
			lp, top = append(lp, nil), append(top, nil)
		} else {
			m := map[string]float64{}
			for _, a := range t.Top {
				m[a.Token] = a.Logprob
			}
			lp, top = append(lp, t.Logprob), append(top, m)
		}
		offs = append(offs, offset)
		offset += t.TextLen
	}
	if len(lps) > 0 {
		out["tokens"], out["token_logprobs"], out["top_logprobs"], out["text_offset"] = toks, lp, top, offs
	}
	return out
}

// byteInts writes bytes as a JSON array of numbers, as OpenAI does.
func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
