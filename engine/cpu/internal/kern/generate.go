package kern

// dot_t8rk_amd64.s (the eight-row Q4_K prefill kernel on repacked Q8_K
// activations) is generated: change gen/t8rk.py, then run go generate here.
// TestT8RKGenerated fails when the committed file and the generator disagree.
//
//go:generate python3 gen/t8rk.py dot_t8rk_amd64.s
