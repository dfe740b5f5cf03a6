package kern

// dot_t8rk_amd64.s (the eight-row Q4_K prefill kernel on repacked Q8_K
// activations) is generated: change gen/t8rk.py, then run go generate here.
// TestT8RKGenerated fails when the committed file and the generator disagree.
//
//go:generate python3 gen/t8rk.py dot_t8rk_amd64.s
//
// r16_amd64.s (the packed AVX-512 VNNI kernels of r16.go) likewise comes
// from gen/r16.py; TestR16Generated holds it to that.
//
//go:generate sh -c "python3 gen/r16.py > r16_amd64.s"
//
// r16avx2_amd64.s (the packed kernels on AVX2) comes from gen/r16avx2.py;
// TestR16AVX2Generated holds it to that.
//
//go:generate sh -c "python3 gen/r16avx2.py > r16avx2_amd64.s"
//
// r16f_amd64.s (the packed float kernels of r16f.go on AVX-512F and their
// weight packing) comes from gen/r16f.py; TestR16FGenerated holds it to that.
//
//go:generate sh -c "python3 gen/r16f.py > r16f_amd64.s"
