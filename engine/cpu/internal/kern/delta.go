package kern

// DeltaRow advances one row of a Gated DeltaNet head's state by one token
// and returns the row's output before the head's scale:
//
//	row ← decay·row;  d = beta·(v − row·k);  row ← row + d·k;  return row·q
//
// with every product and sum a separate float32 rounding (no fused
// multiply-add) and each dot product accumulated in eight lanes — lane j
// takes elements j, j+8, … in order, a tail of len%8 goes to lane 0 — and
// reduced as ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)). That is the arithmetic
// engine/cpu's delta rule has always done (it agrees with llama.cpp's
// qwen35 logits to 1e-14), so the AVX2 form is a speed-up only: it gives
// the same bits (TestDeltaRowMatchesGo). row, k and q have the same length.
func DeltaRow(row, k, q []float32, decay, v, beta float32) float32 {
	if len(k) != len(row) || len(q) != len(row) {
		panic("kern: DeltaRow: row, k and q differ in length")
	}
	if len(row) == 0 {
		return 0
	}
	return deltaRow(row, k, q, decay, v, beta)
}

var deltaRow = deltaRowGo

func deltaRowGo(row, k, q []float32, decay, v, beta float32) float32 {
	for c := range row {
		row[c] *= decay
	}
	d := beta * float32(v-dot8(row, k))
	for c, kc := range k {
		row[c] += float32(d * kc)
	}
	return dot8(row, q)
}

// dot8 is Σ a·b in eight float32 lanes, reduced pairwise (see DeltaRow).
func dot8(a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		for j := 0; j < 8; j++ {
			s[j] += float32(a[i+j] * b[i+j]) // the conversion forbids a fused multiply-add
		}
	}
	for ; i < len(a); i++ {
		s[0] += float32(a[i] * b[i])
	}
	return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
}
