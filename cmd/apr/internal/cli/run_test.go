package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aprqa/apr/cmd/apr/internal/cli"
	"github.com/aprqa/apr/engine/cuda"
	"github.com/aprqa/apr/internal/testutil"
)

// runApr calls apr in-process and returns its exit code and streams.
func runApr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(args, bytes.NewReader(nil), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// oneJSON decodes stdout, which must hold exactly one JSON object, into v
// and returns its keys.
func oneJSON(t *testing.T, stdout string, v any) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, stdout)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON document: %q", stdout)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type runJSON struct {
	Model         string  `json:"model"`
	ModelSHA256   string  `json:"model_sha256"`
	Backend       string  `json:"backend"`
	PromptTokens  int     `json:"prompt_tokens"`
	TokensOut     int     `json:"tokens_out"`
	TokenIDs      []int32 `json:"token_ids"`
	Text          string  `json:"text"`
	LoadMS        float64 `json:"load_ms"`
	H2DMS         float64 `json:"h2d_ms"`
	F2MS          float64 `json:"f2_ms"`
	F2Verdict     string  `json:"f2_verdict"`
	PrefillMS     float64 `json:"prefill_ms"`
	DecodeMS      float64 `json:"decode_ms"`
	WallMS        float64 `json:"wall_ms"`
	DecodeTokPerS float64 `json:"decode_tok_per_s"`
	FinishReason  string  `json:"finish_reason"`
}

type greedyFile struct {
	Model   string `json:"model"`
	SHA256  string `json:"sha256"`
	NGen    int    `json:"n_gen"`
	Results []struct {
		Prompt       string    `json:"prompt"`
		PromptIDs    []int32   `json:"prompt_ids"`
		GeneratedIDs []int32   `json:"generated_ids"`
		Margins      []float64 `json:"top1_top2_margins"`
	} `json:"results"`
}

func readGreedy(t *testing.T, model string) greedyFile {
	t.Helper()
	b, err := os.ReadFile(testutil.Fixture(t, filepath.Join("expect", model+".greedy.json")))
	if err != nil {
		t.Fatal(err)
	}
	var g greedyFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func fixtureModel(t *testing.T, name string) string {
	t.Helper()
	if name == "stories260K" {
		return testutil.Fixture(t, "models/stories260K.gguf")
	}
	return testutil.Fixture(t, filepath.Join("models", "synth", name+".gguf"))
}

// TestRunGreedyMatchesLlamaCpp: `apr run --raw --ignore-eos --json` from
// each fixture prompt gives llama.cpp's token ids: all of them for
// stories260K, and up to the first step whose recorded top-1/top-2 margin is
// below 1e-3 for the unquantized synthetic models. This goes through the
// tokenizer, so prompt_tokens must also match.
func TestRunGreedyMatchesLlamaCpp(t *testing.T) {
	for _, name := range []string{"stories260K", "qwen2-tiny-F32", "llama-tiny-F16", "qwen3-tiny-F16", "qwen35-tiny-F32"} {
		t.Run(name, func(t *testing.T) {
			g := readGreedy(t, name)
			for _, r := range g.Results {
				code, stdout, stderr := runApr(t, "run", fixtureModel(t, name), "-p", r.Prompt, "-n", strconv.Itoa(g.NGen),
					"--raw", "--ignore-eos", "--json")
				if code != 0 {
					t.Fatalf("apr run exit %d: %s", code, stderr)
				}
				var got runJSON
				oneJSON(t, stdout, &got)
				if got.PromptTokens != len(r.PromptIDs) {
					t.Errorf("prompt %q: prompt_tokens %d, llama.cpp tokenized %d", r.Prompt, got.PromptTokens, len(r.PromptIDs))
				}
				if got.ModelSHA256 != g.SHA256 {
					t.Errorf("model_sha256 %s, want %s", got.ModelSHA256, g.SHA256)
				}
				upto := len(r.GeneratedIDs)
				if name != "stories260K" {
					for s, m := range r.Margins {
						if m < 1e-3 {
							upto = s
							break
						}
					}
				}
				if len(got.TokenIDs) != g.NGen {
					t.Fatalf("prompt %q: %d tokens, want %d", r.Prompt, len(got.TokenIDs), g.NGen)
				}
				if diff := cmp.Diff(r.GeneratedIDs[:upto], got.TokenIDs[:upto]); diff != "" {
					t.Errorf("prompt %q: first %d token ids (-llama.cpp +apr):\n%s", r.Prompt, upto, diff)
				}
			}
		})
	}
}

// TestRunJSONIsOneObject: --json prints exactly one object with exactly the
// documented fields, and the stage fields are consistent.
func TestRunJSONIsOneObject(t *testing.T) {
	code, stdout, stderr := runApr(t, "run", fixtureModel(t, "stories260K"), "-p", "One day, Lily", "-n", "5", "--raw", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got runJSON
	keys := oneJSON(t, stdout, &got)
	want := []string{"backend", "decode_ms", "decode_tok_per_s", "f2_ms", "f2_verdict", "finish_reason", "h2d_ms", "load_ms", "model", "model_sha256",
		"prefill_ms", "prompt_tokens", "text", "tokens_out", "token_ids", "wall_ms"}
	sort.Strings(want)
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("apr run --json keys (-want +got):\n%s", diff)
	}
	if got.Backend != "cpu" || got.H2DMS != 0 || got.TokensOut != len(got.TokenIDs) || got.TokensOut < 1 {
		t.Errorf("implausible: %+v", got)
	}
	sum := got.LoadMS + got.H2DMS + got.PrefillMS + got.DecodeMS
	if sum > got.WallMS*1.05 || sum < got.WallMS*0.95 {
		t.Errorf("stages sum to %.3f ms, wall_ms %.3f", sum, got.WallMS)
	}
	if strings.Contains(stderr, "{") {
		t.Errorf("stderr holds JSON: %q", stderr)
	}
}

// TestRunHumanOutput: without --json the completion is on stdout and the
// statistics on stderr.
func TestRunHumanOutput(t *testing.T) {
	code, stdout, stderr := runApr(t, "run", fixtureModel(t, "stories260K"), "-p", "Once upon a time", "-n", "12", "--raw")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, ", there was a little girl") {
		t.Errorf("stdout = %q, want the completion", stdout)
	}
	if !strings.Contains(stderr, "prefill") || strings.Contains(stdout, "prefill") {
		t.Errorf("statistics not (only) on stderr: stdout %q stderr %q", stdout, stderr)
	}
}

// TestRunAppliesChatTemplate: without --raw the prompt goes through the
// model's Qwen3 template, which renders one user message exactly as the
// third fixture prompt spells it, so the generation must be the same.
func TestRunAppliesChatTemplate(t *testing.T) {
	g := readGreedy(t, "qwen2-tiny-F32")
	r := g.Results[2]
	if !strings.Contains(r.Prompt, "What is the meaning of life?") {
		t.Fatalf("fixture prompt changed: %q", r.Prompt)
	}
	code, stdout, stderr := runApr(t, "run", fixtureModel(t, "qwen2-tiny-F32"), "-p", "What is the meaning of life?", "-n", "8", "--ignore-eos", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got runJSON
	oneJSON(t, stdout, &got)
	if got.PromptTokens != len(r.PromptIDs) {
		t.Errorf("templated prompt has %d tokens, the fixture's rendered prompt %d", got.PromptTokens, len(r.PromptIDs))
	}
	if diff := cmp.Diff(r.GeneratedIDs[:8], got.TokenIDs); diff != "" {
		t.Errorf("templated generation (-llama.cpp on the rendered prompt +apr):\n%s", diff)
	}
}

// TestRunCUDAUnavailable: on a machine without a CUDA driver and device,
// apr run --backend cuda is refused (exit 3) by "backend" with the reason
// apr devices gives — never run on another backend.
func TestRunCUDAUnavailable(t *testing.T) {
	if _, err := cuda.Available(); err == nil {
		t.Skip("SKIP (not a pass): this machine has a CUDA device")
	}
	_, why := cuda.Available()
	stories := fixtureModel(t, "stories260K")
	code, stdout, stderr := runApr(t, "run", stories, "-p", "x", "--raw", "--backend", "cuda", "--json")
	if code != cli.ExitRefused || !strings.Contains(stderr, `refused by backend: backend "cuda" cannot run here`) || !strings.Contains(stderr, why.Error()) || stdout != "" {
		t.Fatalf("apr run --backend cuda without CUDA: exit %d stdout %q stderr %q; want exit 3, nothing on stdout, refused by backend with %q", code, stdout, stderr, why)
	}
	code, stdout, _ = runApr(t, "devices", "--json")
	if code != 0 || !strings.Contains(stdout, `"available": false`) || !strings.Contains(stdout, jsonQuote(why.Error())) {
		t.Fatalf("apr devices --json without CUDA: exit %d, %s; want available false with the reason %q", code, stdout, why)
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func TestRunExitCodes(t *testing.T) {
	stories := fixtureModel(t, "stories260K")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown backend", []string{"run", stories, "-p", "x", "--raw", "--backend", "tpu"}, cli.ExitRefused, `backend "tpu"`},
		{"no chat template", []string{"run", stories, "-p", "x"}, cli.ExitRefused, "tokenizer.chat_template"},
		{"missing prompt", []string{"run", stories}, cli.ExitBadInput, "-p"},
		{"n zero", []string{"run", stories, "-p", "x", "--raw", "-n", "0"}, cli.ExitBadInput, "-n"},
		{"negative temperature", []string{"run", stories, "-p", "x", "--raw", "--temp", "-1"}, cli.ExitBadInput, "temperature"},
		{"bad plant delay", []string{"run", stories, "-p", "x", "--raw", "--plant-delay", "lunch=5"}, cli.ExitBadInput, "lunch"},
		{"missing file", []string{"run", "/nonexistent.gguf", "-p", "x", "--raw"}, cli.ExitBadInput, "nonexistent"},
		{"logit bias without =", []string{"run", stories, "-p", "x", "--raw", "--logit-bias", "5"}, cli.ExitBadInput, "want ID=BIAS"},
		{"logit bias out of range", []string{"run", stories, "-p", "x", "--raw", "--logit-bias", "5=-300"}, cli.ExitBadInput, "[-100, 100]"},
		{"logit bias past the vocabulary", []string{"run", stories, "-p", "x", "--raw", "--logit-bias", "512=1"}, cli.ExitBadInput, "past the vocabulary of 512"},
		{"frequency penalty NaN", []string{"run", stories, "-p", "x", "--raw", "--frequency-penalty", "NaN"}, cli.ExitBadInput, "frequency penalty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runApr(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("apr %v: exit %d stderr %q; want exit %d mentioning %q", tt.args, code, stderr, tt.code, tt.stderr)
			}
			if stdout != "" {
				t.Errorf("apr %v wrote to stdout: %q", tt.args, stdout)
			}
		})
	}
}

func TestRunPlantDelayFlag(t *testing.T) {
	code, stdout, stderr := runApr(t, "run", fixtureModel(t, "stories260K"), "-p", "x", "--raw", "-n", "2", "--json", "--plant-delay", "decode=200")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got runJSON
	oneJSON(t, stdout, &got)
	if got.DecodeMS < 200 {
		t.Errorf("decode_ms %.1f with a planted 200 ms", got.DecodeMS)
	}
}

// TestRunNoF2: --no-f2 changes nothing on a host backend (F2 never gates
// cpu: f2_verdict "not_required", no warning), the same tokens as without
// it; on a device backend F2Skip makes the verdict "off" (falsify's
// TestF2Skip).
func TestRunNoF2(t *testing.T) {
	args := []string{"run", fixtureModel(t, "stories260K"), "-p", "One day, Lily", "-n", "5", "--raw", "--json"}
	code, stdout, stderr := runApr(t, append(args, "--no-f2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var off, on runJSON
	oneJSON(t, stdout, &off)
	if off.F2Verdict != "not_required" || off.F2MS != 0 || strings.Contains(stderr, "F2 is off") {
		t.Errorf("--no-f2 on cpu: f2_verdict %q f2_ms %v, stderr %q; want not_required, 0, no warning", off.F2Verdict, off.F2MS, stderr)
	}
	code, stdout, stderr = runApr(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	oneJSON(t, stdout, &on)
	if !slices.Equal(on.TokenIDs, off.TokenIDs) {
		t.Errorf("--no-f2 changed the tokens: %v, without it %v", off.TokenIDs, on.TokenIDs)
	}
}

// TestRunSamplingFlags: --logit-bias and the penalties reach the sampler:
// banning stories260K's greedy first token (432) makes the next best the
// first, and the same flags twice give the same ids.
func TestRunSamplingFlags(t *testing.T) {
	stories := fixtureModel(t, "stories260K")
	first := func(args ...string) []int32 {
		t.Helper()
		code, stdout, stderr := runApr(t, append([]string{"run", stories, "-p", "Once upon a time", "--raw", "-n", "3", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("apr run %v: exit %d: %s", args, code, stderr)
		}
		var doc struct {
			IDs []int32 `json:"token_ids"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.IDs
	}
	if got := first(); len(got) == 0 || got[0] != 432 {
		t.Fatalf("greedy ids %v, want 432 first (expect/stories260K.greedy.json)", got)
	}
	banned := first("--logit-bias", "432=-100")
	if banned[0] == 432 {
		t.Errorf("--logit-bias 432=-100: ids %v still start with 432", banned)
	}
	pen := []string{"--temp", "1", "--seed", "3", "--frequency-penalty", "2", "--presence-penalty", "-1", "--logit-bias", "383=4"}
	if a, b := first(pen...), first(pen...); !slices.Equal(a, b) {
		t.Errorf("the same sampling flags gave %v then %v", a, b)
	}
}
