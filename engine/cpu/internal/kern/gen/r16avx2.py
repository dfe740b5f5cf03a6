#!/usr/bin/env python3
"""Writes r16avx2_amd64.s: the packed (r16) kernels of r16.go on AVX2.

    python3 gen/r16avx2.py > r16avx2_amd64.s

The weights are the avx512vnni16 kernels' packing (r16.go): one step of
64 bytes holds four values of sixteen rows, so a 256-bit register holds
four values of eight rows (lane r = row r, rows 8h..8h+7 at 32h). AVX2 has
no VPDPBUSD: the products go through VPMADDUBSW (unsigned × signed bytes,
pairs summed to int16) and VPMADDWD against int16 ones (pairs to int32),
with ggml's sign trick so that no pair saturates: w = u XOR 0x80, then
VPMADDUBSW(|w|, sign(a, w)), |w| ≤ 128 and |a| ≤ 127 (Q8_0 activation
quants never reach −128), so a pair's sum is at most 2·128·127 < 2¹⁵. The
int32 block sum is Σw·a exactly, the value the VNNI kernels reach through
Σ(w+128)·a − 128·Σa, and the float32 chain per pair is theirs, so the
results are bit for bit theirs and their Go twins'.
"""

PF = 8  # blocks ahead that r16x1 prefetches its weights

FORMATS = {"Q8_0": 512, "Q5_0": 320}  # the Q8_0-activation formats; Q4_K below


def weights5(k, h, wreg, tmp, c=("r16a2shuf<>(SB)", "r16a2bits<>(SB)", "r16a2x10<>(SB)")):
    """Q5_0: the unsigned q5 = nibble + 16·(fifth bit) in [0, 31] of step k,
    half h into wreg: the nibbles (high ones of step k-4's bytes for k >= 4),
    and the mask's 32 bits of this half spread to bytes (VPSHUFB of the
    broadcast dword: byte i takes mask byte i/8; VPAND/VPCMPEQB with bit
    i mod 8; VPAND 16). The kernel then forms Σq5·a and adds −16·Σa, the
    corrections −128·Σa shifted right by 3."""
    out = [f"VMOVDQU {64*(k%4)+32*h}(SI), {wreg}"]
    if k >= 4:
        out.append(f"VPSRLW $4, {wreg}, {wreg}")
    out += [f"VPAND Y12, {wreg}, {wreg}",
            f"VPBROADCASTD {256+8*k+4*h}(SI), {tmp}",
            f"VPSHUFB {c[0]}, {tmp}, {tmp}",
            f"VPAND {c[1]}, {tmp}, {tmp}",
            f"VPCMPEQB {c[1]}, {tmp}, {tmp}",
            f"VPAND {c[2]}, {tmp}, {tmp}",
            f"VPOR {tmp}, {wreg}, {wreg}"]
    return out


def consts(fmt="Q8_0"):
    c = "0x80808080" if fmt == "Q8_0" else "0x0F0F0F0F"
    return ["MOVL $0x00010001, AX", "MOVQ AX, X11", "VPBROADCASTD X11, Y11",
            f"MOVL ${c}, AX", "MOVQ AX, X12", "VPBROADCASTD X12, Y12"]


def x8(fmt, qb):
    """Sixteen weight rows by eight activation rows, in four passes: half h
    of the rows (eight lanes) by quad q of the activation rows."""
    name = f"r16x8{fmt}AVX2"
    L = [f"// func {name}(nb int, w, aq []byte, sc []float32, init []int32, out []float32, ostride int)",
         f"TEXT ·{name}(SB), NOSPLIT, $0-136"]
    L += consts(fmt)
    L += ["MOVQ ostride+128(FP), BX", "SHLQ $2, BX"]
    for h in range(2):
        for q in range(2):
            lbl = f"{name}h{h}q{q}"
            L += ["MOVQ nb+0(FP), CX", "MOVQ w_base+8(FP), SI",
                  f"IMUL3Q ${qb}, CX, R8", "ADDQ SI, R8"]
            if h:  # Q5_0's steps are read with their half's offsets
                L += ["ADDQ $32, SI", "ADDQ $16, R8"] if fmt == "Q8_0" else ["ADDQ $16, R8"]
            L += ["MOVQ aq_base+32(FP), DI", "MOVQ sc_base+56(FP), R9", "MOVQ init_base+80(FP), R10"]
            if q:
                L += ["ADDQ $128, DI", "ADDQ $16, R9", "ADDQ $16, R10"]
            L += [f"VPXOR Y{4+t}, Y{4+t}, Y{4+t}" for t in range(4)]
            L += ["PCALIGN $32", f"{lbl}:"]
            if fmt == "Q5_0":
                L += [f"VPBROADCASTD {4*t}(R10), Y{t}" for t in range(4)]
                L += [f"VPSRAD $3, Y{t}, Y{t}" for t in range(4)]
            for k in range(8):
                if fmt == "Q8_0":
                    L += [f"VPXOR {64*k}(SI), Y12, Y8", "VPABSB Y8, Y9"]
                else:
                    L += weights5(k, h, "Y9", "Y8")
                for t in range(4):
                    y = "Y10" if t % 2 == 0 else "Y15"
                    L.append(f"VPBROADCASTD {32*t+4*k}(DI), {y}")
                    if fmt == "Q8_0":
                        L.append(f"VPSIGNB Y8, {y}, {y}")
                    L.append(f"VPMADDUBSW {y}, Y9, {y}")
                    if k == 0 and fmt == "Q8_0":
                        L.append(f"VPMADDWD Y11, {y}, Y{t}")
                    else:
                        L += [f"VPMADDWD Y11, {y}, {y}", f"VPADDD {y}, Y{t}, Y{t}"]
            L.append("VCVTPH2PS (R8), Y13")
            for t in range(4):
                L += [f"VCVTDQ2PS Y{t}, Y{t}", f"VBROADCASTSS {4*t}(R9), Y14",
                      "VMULPS Y13, Y14, Y14", f"VFMADD231PS Y14, Y{t}, Y{4+t}"]
            L += [f"ADDQ ${qb}, SI", "ADDQ $32, R8", "ADDQ $256, DI", "ADDQ $32, R9", "ADDQ $32, R10",
                  "DECQ CX", f"JNZ {lbl}",
                  "MOVQ out_base+104(FP), AX"]
            if q:
                L += ["LEAQ (AX)(BX*4), AX"]
            for t in range(4):
                L.append(f"VMOVUPS Y{4+t}, {32*h}(AX)")
                if t < 3:
                    L.append("ADDQ BX, AX")
    L += ["VZEROUPPER", "RET"]
    return L


def x1(fmt, qb):
    """Sixteen weight rows by one Q8_0 activation row, both halves at once."""
    name = f"r16x1{fmt}AVX2"
    L = [f"// func {name}(nb int, w, a, aux []byte, out []float32)",
         f"TEXT ·{name}(SB), NOSPLIT, $0-104",
         "MOVQ nb+0(FP), CX", "MOVQ w_base+8(FP), SI",
         f"IMUL3Q ${qb}, CX, R8", "ADDQ SI, R8",
         "MOVQ a_base+32(FP), DI", "MOVQ aux_base+56(FP), R10"]
    L += consts(fmt)
    L += ["VPXOR Y4, Y4, Y4", "VPXOR Y5, Y5, Y5", "PCALIGN $32", f"{name}loop:"]
    regs = [("Y8", "Y9", "Y14", "Y0"), ("Y2", "Y3", "Y15", "Y1")]
    L += [f"PREFETCHT0 {PF*qb+i}(SI)" for i in range(0, qb, 64)]
    if fmt == "Q5_0":
        L += ["VPBROADCASTD (R10), Y0", "VPSRAD $3, Y0, Y0", "VMOVDQA Y0, Y1"]
        L[L.index("PCALIGN $32"):L.index("PCALIGN $32")] = [
            "VMOVDQU r16a2shuf<>(SB), Y6", "VMOVDQU r16a2bits<>(SB), Y7", "VMOVDQU r16a2x10<>(SB), Y13"]
    for k in range(8):
        L.append(f"VPBROADCASTD {2+4*k}(DI), Y10")
        for h in range(2):
            w, aw, p, acc = regs[h]
            if fmt == "Q8_0":
                L += [f"VPXOR {64*k+32*h}(SI), Y12, {w}", f"VPABSB {w}, {aw}",
                      f"VPSIGNB {w}, Y10, {p}", f"VPMADDUBSW {p}, {aw}, {p}"]
            else:
                L += weights5(k, h, aw, w, ("Y6", "Y7", "Y13"))
                L.append(f"VPMADDUBSW Y10, {aw}, {p}")
            if k == 0 and fmt == "Q8_0":
                L.append(f"VPMADDWD Y11, {p}, {acc}")
            else:
                L += [f"VPMADDWD Y11, {p}, {p}", f"VPADDD {p}, {acc}, {acc}"]
    L += ["VBROADCASTSS 4(R10), Y2", "VCVTPH2PS (R8), Y3", "VCVTPH2PS 16(R8), Y8",
          "VMULPS Y3, Y2, Y3", "VMULPS Y8, Y2, Y8",
          "VCVTDQ2PS Y0, Y0", "VCVTDQ2PS Y1, Y1",
          "VFMADD231PS Y3, Y0, Y4", "VFMADD231PS Y8, Y1, Y5",
          f"ADDQ ${qb}, SI", "ADDQ $32, R8", "ADDQ $34, DI", "ADDQ $8, R10",
          "DECQ CX", f"JNZ {name}loop",
          "MOVQ out_base+80(FP), AX", "VMOVUPS Y4, (AX)", "VMOVUPS Y5, 32(AX)",
          "VZEROUPPER", "RET"]
    return L


HEAD = """// Code generated by gen/r16avx2.py; DO NOT EDIT.

//go:build amd64 && !noasm

#include "textflag.h"

// Packed kernels on AVX2 (instruction set "avx2r16", r16.go, r16avx2_amd64.go):
// the avx512vnni16 kernels' packed weights and float32 chains, with the
// block's integer sum Σw·a formed by VPMADDUBSW(|w|, sign(a, w)) and
// VPMADDWD against int16 ones (ggml's sign trick; w = u XOR 0x80).
//
// r16x8: four passes (half h of the sixteen rows, quad q of the eight
// activation rows), each over every block: CX blocks, SI weight quants
// (+32h), R8 weight scales (+16h), DI repacked activation quants (block b
// of row t at 256b + 32t), R9 activation scales (8b + t); Y0..Y3 the four
// rows' int32 sums, Y4..Y7 their float32 chains, Y8 w, Y9 |w|, Y10/Y15
// products, Y11 int16 ones, Y12 bytes 0x80, Y13 weight scales, Y14 scale
// products. The corrections init are not read (Σw·a needs none).
//
// r16x1: DI the Q8_0 activation row, R10 aux (the float32 scale at 4 of
// each block's eight bytes); Y0/Y1 the int32 sums of rows 0..7 and 8..15,
// Y4/Y5 their float32 chains."""

DATA = """
// Q5_0's fifth bits: VPSHUFB indices (byte i of each 128-bit lane takes
// byte i/8 of the broadcast mask dword), bit i mod 8 of byte i, and 16.
DATA r16a2shuf<>+0(SB)/8, $0x0000000000000000
DATA r16a2shuf<>+8(SB)/8, $0x0101010101010101
DATA r16a2shuf<>+16(SB)/8, $0x0202020202020202
DATA r16a2shuf<>+24(SB)/8, $0x0303030303030303
GLOBL r16a2shuf<>(SB), RODATA|NOPTR, $32
DATA r16a2bits<>+0(SB)/8, $0x8040201008040201
DATA r16a2bits<>+8(SB)/8, $0x8040201008040201
DATA r16a2bits<>+16(SB)/8, $0x8040201008040201
DATA r16a2bits<>+24(SB)/8, $0x8040201008040201
GLOBL r16a2bits<>(SB), RODATA|NOPTR, $32
DATA r16a2x10<>+0(SB)/8, $0x1010101010101010
DATA r16a2x10<>+8(SB)/8, $0x1010101010101010
DATA r16a2x10<>+16(SB)/8, $0x1010101010101010
DATA r16a2x10<>+24(SB)/8, $0x1010101010101010
GLOBL r16a2x10<>(SB), RODATA|NOPTR, $32"""

out = [HEAD, DATA]
for fmt, qb in FORMATS.items():
    for body in (x8(fmt, qb), x1(fmt, qb)):
        out.append("")
        out.append(body[0])
        out.append(body[1])
        for l in body[2:]:
            out.append(l if l.endswith(":") else "\t" + l)
print("\n".join(out))


def q4k(T):
    """Packed Q4_K (r16k.go) against T Q8_K activation rows, in passes: half
    h of the sixteen rows by (at most) two activation rows. Per sub-block
    the nibble products go through VPMADDUBSW and stay int16 over its 32
    values (eight steps of at most 2·15·128, below 2¹⁵), then VPMADDWD
    with the row's scale in both int16 halves of its lane gives
    sc·Σq·a exactly in int32; the mins go through VPMADDWD on the pair
    sums of bsums, as VPDPWSSD does in the VNNI kernel."""
    name = f"r16k{T}Q4_KAVX2"
    L = [f"// func {name}(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)",
         f"TEXT ·{name}(SB), NOSPLIT, $0-128",
         "MOVL $0x0F0F0F0F, AX", "MOVQ AX, X10", "VPBROADCASTD X10, Y10",
         "MOVQ astride+56(FP), DX", "MOVQ xstride+88(FP), R8",
         "MOVQ ostride+120(FP), BX", "SHLQ $2, BX"]
    A = ["(DI)", "(DI)(DX*1)"]
    X = ["(R12)", "(R12)(R8*1)"]
    passes = [(h, t0) for h in range(2) for t0 in range(0, T, 2)]
    for h, t0 in passes:
        P = min(2, T - t0)
        lbl = f"{name}h{h}t{t0}"
        L += ["MOVQ nsb+0(FP), CX", "MOVQ w_base+8(FP), SI",
              "MOVQ a_base+32(FP), DI", "MOVQ aux_base+64(FP), R12"]
        if t0:
            L += [f"IMUL3Q ${t0}, DX, AX", "ADDQ AX, DI", f"IMUL3Q ${t0}, R8, AX", "ADDQ AX, R12"]
        L += [f"VPXOR Y{4+t}, Y{4+t}, Y{4+t}" for t in range(P)]
        L += ["PCALIGN $32", f"{lbl}:", f"VCVTPH2PS {2304+16*h}(SI), Y15"]
        for t in range(P):
            L += [f"VBROADCASTSS 16{X[t]}, Y{6+t}", f"VMULPS Y15, Y{6+t}, Y{6+t}"]
        for j in range(4):
            for k in range(8):
                L += [f"VMOVDQU {512*j+64*k+32*h}(SI), Y8", "VPSRLW $4, Y8, Y9",
                      "VPAND Y10, Y8, Y8", "VPAND Y10, Y9, Y9"]
                for t in range(P):
                    for (reg, off, acc) in (("Y8", 4+64*j+4*k, 2*t), ("Y9", 4+64*j+32+4*k, 2*t+1)):
                        tmp = "Y11" if reg == "Y8" else "Y12"
                        L.append(f"VPBROADCASTD {off}{A[t]}, {tmp}")
                        if k == 0:
                            L.append(f"VPMADDUBSW {tmp}, {reg}, Y{acc}")
                        else:
                            L += [f"VPMADDUBSW {tmp}, {reg}, {tmp}", f"VPADDW {tmp}, Y{acc}, Y{acc}"]
            for (reg, s) in (("Y13", 2*j), ("Y14", 2*j+1)):
                L += [f"VPMOVZXBD {2048+16*s+8*h}(SI), {reg}", f"VPSLLD $16, {reg}, Y15", f"VPOR Y15, {reg}, {reg}"]
            for t in range(P):
                L += [f"VPMADDWD Y13, Y{2*t}, Y{2*t}", f"VPMADDWD Y14, Y{2*t+1}, Y{2*t+1}",
                      f"VPADDD Y{2*t+1}, Y{2*t}, Y{2*t}", f"VCVTDQ2PS Y{2*t}, Y{2*t}",
                      f"VFMADD231PS Y{6+t}, Y{2*t}, Y{4+t}"]
        for p in range(4):
            L.append(f"VPMOVZXBW {2176+32*p+16*h}(SI), Y8")
            for t in range(P):
                L.append(f"VPBROADCASTD {4*p}{X[t]}, Y11")
                if p == 0:
                    L.append(f"VPMADDWD Y11, Y8, Y{2*t}")
                else:
                    L += ["VPMADDWD Y11, Y8, Y11", f"VPADDD Y11, Y{2*t}, Y{2*t}"]
        L.append(f"VCVTPH2PS {2336+16*h}(SI), Y15")
        for t in range(P):
            L += [f"VCVTDQ2PS Y{2*t}, Y{2*t}", f"VBROADCASTSS 20{X[t]}, Y11", "VMULPS Y15, Y11, Y11",
                  f"VFMADD231PS Y11, Y{2*t}, Y{4+t}"]
        L += ["ADDQ $2368, SI", "ADDQ $292, DI", "ADDQ $96, R12", "DECQ CX", f"JNZ {lbl}",
              "MOVQ out_base+96(FP), AX"]
        if t0:
            L += [f"IMUL3Q ${t0}, BX, R9", "ADDQ R9, AX"]
        for t in range(P):
            L.append(f"VMOVUPS Y{4+t}, {32*h}(AX)")
            if t < P - 1:
                L.append("ADDQ BX, AX")
    L += ["VZEROUPPER", "RET"]
    return L


def q6k(T):
    """Packed Q6_K (r16k.go) against T Q8_K activation rows, in passes: half
    h of the sixteen rows by (at most) two activation rows. The packed bytes
    u = q6 + 96 become q6 in [0, 63] (VPSUBB 96); VPMADDUBSW against the
    quants, two steps summed in int16 (at most 2·2·63·128 < 2¹⁵), VPMADDWD
    with the row's int8 scale in both int16 halves of its lane; the offset
    −32 of the values enters as −32·(sc_2j·bsums_2j + sc_2j+1·bsums_2j+1),
    one VPMADDWD of the scale pair on the bsums pair. Each integer is the
    VNNI kernel's v_j, so the float32 chain is bit for bit its own."""
    name = f"r16k{T}Q6_KAVX2"
    L = [f"// func {name}(nsb int, w, a []byte, astride int, aux []byte, xstride int, out []float32, ostride int)",
         f"TEXT ·{name}(SB), NOSPLIT, $0-128",
         "MOVL $0x60606060, AX", "MOVQ AX, X11", "VPBROADCASTD X11, Y11",
         "MOVQ astride+56(FP), DX", "MOVQ xstride+88(FP), R8",
         "MOVQ ostride+120(FP), BX", "SHLQ $2, BX"]
    A = ["(DI)", "(DI)(DX*1)"]
    X = ["(R12)", "(R12)(R8*1)"]
    # per act: P0, P1, v, chain, sf
    R = [("Y0", "Y1", "Y2", "Y3", "Y4"), ("Y5", "Y6", "Y7", "Y8", "Y9")]
    passes = [(h, t0) for h in range(2) for t0 in range(0, T, 2)]
    for h, t0 in passes:
        P = min(2, T - t0)
        lbl = f"{name}h{h}t{t0}"
        L += ["MOVQ nsb+0(FP), CX", "MOVQ w_base+8(FP), SI",
              "MOVQ a_base+32(FP), DI", "MOVQ aux_base+64(FP), R12"]
        if t0:
            L += [f"IMUL3Q ${t0}, DX, AX", "ADDQ AX, DI", f"IMUL3Q ${t0}, R8, AX", "ADDQ AX, R12"]
        L += [f"VPXOR {R[t][3]}, {R[t][3]}, {R[t][3]}" for t in range(P)]
        L += ["PCALIGN $32", f"{lbl}:", f"VCVTPH2PS {4352+16*h}(SI), Y14"]
        for t in range(P):
            L += [f"VBROADCASTSS 16{X[t]}, {R[t][4]}", f"VMULPS Y14, {R[t][4]}, {R[t][4]}"]
        for j in range(8):
            for (reg, s) in (("Y12", 2*j), ("Y13", 2*j+1)):
                L += [f"VPMOVSXBD {4096+16*s+8*h}(SI), {reg}", f"VPSLLD $16, {reg}, Y15",
                      f"VPBLENDW $0xAA, Y15, {reg}, {reg}"]
            for k in range(8):
                L += [f"VMOVDQU {512*j+64*k+32*h}(SI), Y10", "VPSUBB Y11, Y10, Y10"]
                for t in range(P):
                    p = R[t][(k % 4) // 2]
                    L.append(f"VPBROADCASTD {4+32*j+4*k}{A[t]}, Y14")
                    if k % 2 == 0:
                        L.append(f"VPMADDUBSW Y14, Y10, {p}")
                    else:
                        L += ["VPMADDUBSW Y14, Y10, Y14", f"VPADDW Y14, {p}, {p}"]
                if k % 4 == 3:
                    sc = "Y12" if k < 4 else "Y13"
                    for t in range(P):
                        p0, p1, v = R[t][0], R[t][1], R[t][2]
                        if k < 4:
                            L.append(f"VPMADDWD {sc}, {p0}, {v}")
                        else:
                            L += [f"VPMADDWD {sc}, {p0}, {p0}", f"VPADDD {p0}, {v}, {v}"]
                        L += [f"VPMADDWD {sc}, {p1}, {p1}", f"VPADDD {p1}, {v}, {v}"]
            L.append("VPBLENDW $0xAA, Y13, Y12, Y10")
            for t in range(P):
                v, ch, sf = R[t][2], R[t][3], R[t][4]
                L += [f"VPBROADCASTD {260+4*j}{A[t]}, Y14", "VPMADDWD Y10, Y14, Y14",
                      "VPSLLD $5, Y14, Y14", f"VPSUBD Y14, {v}, {v}",
                      f"VCVTDQ2PS {v}, {v}", f"VFMADD231PS {sf}, {v}, {ch}"]
        L += ["ADDQ $4384, SI", "ADDQ $292, DI", "ADDQ $96, R12", "DECQ CX", f"JNZ {lbl}",
              "MOVQ out_base+96(FP), AX"]
        if t0:
            L += [f"IMUL3Q ${t0}, BX, R9", "ADDQ R9, AX"]
        for t in range(P):
            L.append(f"VMOVUPS {R[t][3]}, {32*h}(AX)")
            if t < P - 1:
                L.append("ADDQ BX, AX")
    L += ["VZEROUPPER", "RET"]
    return L


for body in (q4k(4), q4k(1), q6k(4), q6k(1)):
    print()
    print(body[0])
    print(body[1])
    for l in body[2:]:
        print(l if l.endswith(":") else "\t" + l)
