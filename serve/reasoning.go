package serve

import (
	"strings"
	"unicode"
)

// Reasoning (the <think>…</think> of Qwen3, QwQ, Qwen3.5 and other models
// whose chat templates teach it): a reply's reasoning comes back in the
// message's reasoning_content, its answer in content, as llama.cpp's and
// vLLM's servers and DeepSeek's API return them, so that a client shows
// (or drops) the one and acts on the other. A reply starts in its
// reasoning when the prompt ends with an open <think> (the template's
// generation prompt), or when the reply starts with <think>; the reasoning
// ends at </think>. The tool calls are read from the content only. A
// request's reasoning_format "none" leaves the text as the model wrote it.
// An assistant message's reasoning_content goes back to the template,
// which renders it in <think> (or drops it, as the model was trained).

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// templateThinks reports whether a chat template teaches reasoning blocks.
func templateThinks(src string) bool {
	return strings.Contains(src, thinkClose)
}

// thinkTail is how many of a prompt's last tokens promptThinks reads: the
// generation prompt's (Qwen's "<|im_start|>assistant\n<think>\n" is 5).
const thinkTail = 32

// promptThinks reports whether a rendered prompt's text leaves the reply in
// an open reasoning block: its last <think> is not closed.
func promptThinks(text string) bool {
	o := strings.LastIndex(text, thinkOpen)
	return o >= 0 && !strings.Contains(text[o:], thinkClose)
}

// thinkSplitter separates a reply's text into its reasoning and its
// content as the text arrives (the whole reply feeds it once; a stream,
// delta by delta). The reasoning is trimmed of the whitespace around it and
// the content of the whitespace before it, as the templates render a turn
// back (reasoning "\n</think>\n\n" content).
type thinkSplitter struct {
	state int    // thinkStart, thinkIn or thinkOut
	held  string // a possible tag (or its start), or whitespace whose side is not known yet
	lead  bool   // thinkOut: the content's leading whitespace is still dropped
	seen  bool   // thinkIn: the reasoning has had text other than whitespace
}

const (
	thinkStart = iota // before the reply's first text: <think> may open it
	thinkIn           // inside the reasoning
	thinkOut          // the content: no tag has meaning any more
)

// newThinkSplitter returns a splitter for a reply that starts inside its
// reasoning (in: the prompt left <think> open) or may open it.
func newThinkSplitter(in bool) *thinkSplitter {
	if in {
		return &thinkSplitter{state: thinkIn}
	}
	return &thinkSplitter{state: thinkStart}
}

// feed takes the next text and returns the reasoning and the content to
// pass on.
func (t *thinkSplitter) feed(text string) (reasoning, content string) {
	t.held += text
	if t.state == thinkStart {
		s := strings.TrimLeftFunc(t.held, unicode.IsSpace)
		switch {
		case len(s) < len(thinkOpen) && strings.HasPrefix(thinkOpen, s):
			return "", "" // whitespace, or the start of <think>: not known yet
		case strings.HasPrefix(s, thinkOpen):
			t.held, t.state = s[len(thinkOpen):], thinkIn
		default:
			t.state = thinkOut
		}
	}
	if t.state == thinkIn {
		k := strings.Index(t.held, thinkClose)
		if k < 0 {
			// All but a tail that may begin </think>, and the whitespace
			// before it (it ends the reasoning if the tag follows).
			keep := partialSuffix(t.held, thinkClose)
			body := t.held[:len(t.held)-keep]
			out := strings.TrimRightFunc(body, unicode.IsSpace)
			t.held = t.held[len(out):]
			return t.reason(out), ""
		}
		reasoning = t.reason(strings.TrimRightFunc(t.held[:k], unicode.IsSpace))
		t.held, t.state, t.lead = t.held[k+len(thinkClose):], thinkOut, true
	}
	content, t.held = t.held, ""
	if t.lead {
		content = strings.TrimLeftFunc(content, unicode.IsSpace)
		t.lead = content == ""
	}
	return reasoning, content
}

// reason passes on reasoning text, dropping the whitespace it starts with.
func (t *thinkSplitter) reason(s string) string {
	if !t.seen {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		t.seen = s != ""
	}
	return s
}

// finish returns what is still held: before any tag, the reply's text (its
// content); inside the reasoning, the reasoning's tail (a reply cut before
// </think> is all reasoning); after it, nothing.
func (t *thinkSplitter) finish() (reasoning, content string) {
	h := t.held
	t.held = ""
	switch t.state {
	case thinkStart:
		return "", h
	case thinkIn:
		return t.reason(strings.TrimRightFunc(h, unicode.IsSpace)), ""
	}
	return "", ""
}
