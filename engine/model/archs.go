package model

import (
	"github.com/aprqa/apr/refuse"
)

// The architectures this file describes. Each reads only its own keys and
// binds only the tensors llama.cpp creates for it (src/models/<arch>.cpp).
func init() {
	RegisterArch("llama", loadLlama)
	RegisterArch("qwen2", loadQwen2)
	RegisterArch("qwen3", loadQwen3)
	RegisterArch("qwen3moe", loadQwen3MoE)
}

// loadLlama: RMSNorm, normal (adjacent-pair) RoPE with optional frequency
// factors, GQA, SwiGLU or softmax-routed experts, optional biases, tied or
// separate output.
func loadLlama(b *Binder, s *Spec) error {
	if err := b.ReadCommon(s, RopeNorm); err != nil {
		return err
	}
	if s.RopeDim != s.HeadDimK {
		// llama.cpp refuses this for llama ("invalid n_rot").
		return refuse.New(By, "hyper-parameter %q = %d must equal the key head size %d for llama", b.Key("rope.dimension_count"), s.RopeDim, s.HeadDimK)
	}
	if err := b.ReadMoE(s, false, true); err != nil {
		return err
	}
	if err := b.ReadFF(s, s.NExpert == 0); err != nil {
		return err
	}
	if s.NExpert > 0 && s.NFFExpert == 0 {
		s.NFFExpert = s.NFF
	}
	var err error
	if s.RopeFreqs, err = b.OptTensor("rope_freqs.weight", int64(s.RopeDim/2)); err != nil {
		return err
	}
	return bindLayers(b, s, AttnOpts{})
}

// loadQwen2: llama with NEOX RoPE and (optional, in practice present) q/k/v
// biases.
func loadQwen2(b *Binder, s *Spec) error {
	if err := b.ReadCommon(s, RopeNeox); err != nil {
		return err
	}
	if err := b.ReadFF(s, true); err != nil {
		return err
	}
	return bindLayers(b, s, AttnOpts{})
}

// loadQwen3: NEOX RoPE, per-head q/k RMSNorm, key/value head sizes from
// attention.key_length/value_length.
func loadQwen3(b *Binder, s *Spec) error {
	if err := b.ReadCommon(s, RopeNeox); err != nil {
		return err
	}
	if err := b.ReadFF(s, true); err != nil {
		return err
	}
	return bindLayers(b, s, AttnOpts{QKNorm: true})
}

// loadQwen3MoE: qwen3 attention with softmax-routed experts; llama.cpp always
// renormalises the top-k weights for this architecture.
func loadQwen3MoE(b *Binder, s *Spec) error {
	if err := b.ReadCommon(s, RopeNeox); err != nil {
		return err
	}
	if err := b.ReadMoE(s, true, true); err != nil {
		return err
	}
	if err := b.ReadFF(s, false); err != nil {
		return err
	}
	return bindLayers(b, s, AttnOpts{QKNorm: true})
}

func bindLayers(b *Binder, s *Spec, o AttnOpts) error {
	if err := b.BindIO(s); err != nil {
		return err
	}
	for i := range s.Layers {
		l := &s.Layers[i]
		if err := b.BindAttention(s, l, o); err != nil {
			return err
		}
		if err := b.BindFFN(s, l); err != nil {
			return err
		}
	}
	return nil
}
