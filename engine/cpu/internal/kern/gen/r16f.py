#!/usr/bin/env python3
"""Writes r16f_amd64.s: the packed float kernels of r16f.go on AVX-512F.

    python3 gen/r16f.py > r16f_amd64.s

r16fx{T}{nt}(n int, w0, w1, a []byte, astride int, out []float32, ostride int)
multiplies two packed groups of sixteen weight rows (w0: rows 0..15, w1:
rows 16..31; value k of the group's sixteen rows at k*step) by nt float32
activation rows (row t at a + t*astride bytes): accumulator 2t holds token
t against rows 0..15, 2t+1 against rows 16..31, one float32 fma chain per
lane over k = 0..n-1 in order, written to out[t*ostride:] (32 values).
"""

# weight type: bytes per value and how sixteen values at off(reg) get into zw
TYPES = {
    "F32": (4, lambda off, reg, zw: [f"VMOVUPS {off}({reg}), {zw}"]),
    "F16": (2, lambda off, reg, zw: [f"VCVTPH2PS {off}({reg}), {zw}"]),
    "BF16": (2, lambda off, reg, zw: [f"VPMOVZXWD {off}({reg}), {zw}", f"VPSLLD $16, {zw}, {zw}"]),
}
MAX_ACTS = 14
BASES = ["R8", "R9", "R10", "R11"]
INDEX = ["", "(BX*1)", "(BX*2)", "(DX*1)"]
UNROLL = 4


def addr(t, disp):
    d = str(disp) if disp else ""
    return f"{d}({BASES[t // 4]}){INDEX[t % 4]}"


def step(tp, nt, u):
    sz, load = TYPES[tp]
    ws = 16 * sz
    L = load(u * ws, "DI", "Z30") + load(u * ws, "SI", "Z31")
    for t in range(nt):
        zb = "Z28" if t % 2 == 0 else "Z29"
        L += [f"VBROADCASTSS {addr(t, 4*u)}, {zb}",
              f"VFMADD231PS {zb}, Z30, Z{2*t}",
              f"VFMADD231PS {zb}, Z31, Z{2*t+1}"]
    return L


def vdpbf16ps(d, s1, s2):
    """VDPBF16PS zmm_d, zmm_s1, zmm_s2 (EVEX.512.F3.0F38.W0 52 /r: each
    float32 lane of d += the two BF16 products of its pair in s1 and s2),
    which Go's assembler does not know: its bytes."""
    p0 = (~(d >> 3) & 1) << 7 | (~(s2 >> 4) & 1) << 6 | (~(s2 >> 3) & 1) << 5 | (~(d >> 4) & 1) << 4 | 0b10
    p1 = ((~s1) & 0xF) << 3 | 1 << 2 | 0b10
    p2 = 0b10 << 5 | (~(s1 >> 4) & 1) << 3
    modrm = 0xC0 | (d & 7) << 3 | (s2 & 7)
    b = [0x62, p0, p1, p2, 0x52, modrm]
    return [f"BYTE $0x{x:02x}" for x in b[:-1]] + [f"BYTE $0x{b[-1]:02x} // VDPBF16PS Z{s2}, Z{s1}, Z{d}"]


def dp_step(nt, u):
    """Pair u of the BF16 dot-product kernel: weights of the pair (values
    2u, 2u+1 of sixteen rows, 64 bytes a group), one dword broadcast (the
    activation row's two BF16 values) per row."""
    L = [f"VMOVDQU32 {64*u}(DI), Z30", f"VMOVDQU32 {64*u}(SI), Z31"]
    for t in range(nt):
        zb = 28 if t % 2 == 0 else 29
        L.append(f"VPBROADCASTD {addr(t, 4*u)}, Z{zb}")
        L += vdpbf16ps(2 * t, 30, zb) + vdpbf16ps(2 * t + 1, 31, zb)
    return L


def loop_kernel(name, args, nt, step, weights, zero, out, store):
    """The loop every kernel here shares: after args (the signature comment,
    the TEXT line and the loads of the count into CX, the weights into DI
    (and SI), the activations into R8 and their stride into BX), the
    activation row bases, zero's accumulators, UNROLL step(u) a trip and
    the rest one at a time (weights: each pointer with its bytes per step),
    then out's loads of out and ostride, and store(t) for each activation
    row t."""
    nb = (nt + 3) // 4
    L = args + ["LEAQ (BX)(BX*2), DX"]
    for b in range(1, nb):
        L.append(f"LEAQ ({BASES[b-1]})(BX*4), {BASES[b]}")
    L += zero
    L += ["MOVQ CX, AX", f"SHRQ ${UNROLL.bit_length()-1}, AX", f"JZ {name}tail",
          "PCALIGN $32", f"{name}loop:"]
    for u in range(UNROLL):
        L += step(u)
    L += [f"ADDQ ${UNROLL*ws}, {r}" for r, ws in weights]
    L += [f"ADDQ ${4*UNROLL}, {BASES[b]}" for b in range(nb)]
    L += ["DECQ AX", f"JNZ {name}loop",
          f"{name}tail:", f"ANDQ ${UNROLL-1}, CX", f"JZ {name}done", f"{name}loop1:"]
    L += step(0)
    L += [f"ADDQ ${ws}, {r}" for r, ws in weights]
    L += [f"ADDQ $4, {BASES[b]}" for b in range(nb)]
    L += ["DECQ CX", f"JNZ {name}loop1", f"{name}done:"] + out + ["SHLQ $2, BX"]
    for t in range(nt):
        L += store(t)
        if t < nt - 1:
            L.append("ADDQ BX, AX")
    L += ["VZEROUPPER", "RET"]
    return L


def zmm_args(name, count):
    """The AVX-512 kernels' signature: (count int, w0, w1, a []byte, astride
    int, out []float32, ostride int)."""
    return [f"// func {name}({count} int, w0, w1, a []byte, astride int, out []float32, ostride int)",
            f"TEXT ·{name}(SB), NOSPLIT, $0-120",
            f"MOVQ {count}+0(FP), CX", "MOVQ w0_base+8(FP), DI", "MOVQ w1_base+32(FP), SI",
            "MOVQ a_base+56(FP), R8", "MOVQ astride+80(FP), BX"]


def zmm_loop(name, count, nt, step, ws):
    """An AVX-512 kernel: two weight groups (DI, SI) of ws bytes a step,
    accumulators Z0 … Z(2nt−1)."""
    return loop_kernel(name, zmm_args(name, count), nt, step, [("DI", ws), ("SI", ws)],
                       [f"VPXORD Z{i}, Z{i}, Z{i}" for i in range(2 * nt)],
                       ["MOVQ out_base+88(FP), AX", "MOVQ ostride+112(FP), BX"],
                       lambda t: [f"VMOVUPS Z{2*t}, (AX)", f"VMOVUPS Z{2*t+1}, 64(AX)"])


def dp_kernel(nt):
    """r16fdp{nt}(n2 int, w0, w1, a []byte, astride int, out []float32,
    ostride int): the BF16 kernels on pairs (n2 pairs of values; weights
    packed by packBF16PairR16, activation rows BF16)."""
    return zmm_loop(f"r16fdp{nt}", "n2", nt, lambda u: dp_step(nt, u), 64)


def kernel(tp, nt):
    sz, _ = TYPES[tp]
    return zmm_loop(f"r16fx{tp}{nt}", "n", nt, lambda u: step(tp, nt, u), 16 * sz)


def pack_tables():
    """VPERMT2W indices of packR16W16: rows 0..7 (two registers of four rows
    by eight values) to four values by eight rows (u0: values 0..3, u1: 4..7),
    then two such (rows 0..7 and 8..15) to two values by sixteen rows (p0:
    values 0, 1 of the four, p1: 2, 3)."""
    t = {"u0": [], "u1": [], "p0": [], "p1": []}
    for half, name in ((0, "u0"), (1, "u1")):
        for kl in range(4):
            k = 4 * half + kl
            for r in range(8):
                t[name].append(8 * r + k if r < 4 else 32 + 8 * (r - 4) + k)
    for j, name in ((0, "p0"), (1, "p1")):
        for kk in range(2):
            kl = 2 * j + kk
            for r in range(16):
                t[name].append(8 * kl + r if r < 8 else 32 + 8 * kl + r - 8)
    L = []
    for name, idx in t.items():
        for i in range(0, 32, 4):
            v = idx[i] | idx[i + 1] << 16 | idx[i + 2] << 32 | idx[i + 3] << 48
            L.append(f"DATA r16fpack{name}<>+{2*i}(SB)/8, $0x{v:016x}")
        L.append(f"GLOBL r16fpack{name}<>(SB), RODATA|NOPTR, $64")
    return L


def pack():
    """packR16W16(n8 int, src []byte, wrb int, dst []byte): sixteen rows of
    16-bit values (row r at src + r*wrb) to the r16f layout, eight values a
    step (dst + 256 per step)."""
    L = ["// func packR16W16(n8 int, src []byte, wrb int, dst []byte)",
         "TEXT ·packR16W16(SB), NOSPLIT, $0-64",
         "MOVQ n8+0(FP), CX", "MOVQ src_base+8(FP), R8", "MOVQ wrb+32(FP), BX",
         "MOVQ dst_base+40(FP), DI", "TESTQ CX, CX", "JZ packR16W16done",
         "LEAQ (BX)(BX*2), DX", "LEAQ (R8)(BX*4), R9", "LEAQ (R9)(BX*4), R10", "LEAQ (R10)(BX*4), R11",
         "VMOVDQU64 r16fpacku0<>(SB), Z20", "VMOVDQU64 r16fpacku1<>(SB), Z21",
         "VMOVDQU64 r16fpackp0<>(SB), Z22", "VMOVDQU64 r16fpackp1<>(SB), Z23",
         "packR16W16loop:"]
    for q, base in enumerate(BASES):
        L += [f"VMOVDQU ({base}), X{q}",
              f"VINSERTI32X4 $1, ({base})(BX*1), Z{q}, Z{q}",
              f"VINSERTI32X4 $2, ({base})(BX*2), Z{q}, Z{q}",
              f"VINSERTI32X4 $3, ({base})(DX*1), Z{q}, Z{q}"]
    for dst, a, b, idx in ((4, 0, 1, 20), (5, 0, 1, 21), (6, 2, 3, 20), (7, 2, 3, 21),
                           (8, 4, 6, 22), (9, 4, 6, 23), (10, 5, 7, 22), (11, 5, 7, 23)):
        L += [f"VMOVDQU64 Z{a}, Z{dst}", f"VPERMT2W Z{b}, Z{idx}, Z{dst}"]
    L += [f"VMOVDQU64 Z{8+j}, {64*j}(DI)" for j in range(4)]
    L += [f"ADDQ $16, {b}" for b in BASES]
    L += ["ADDQ $256, DI", "DECQ CX", "JNZ packR16W16loop", "packR16W16done:", "VZEROUPPER", "RET"]
    return L


AVX2_TYPES = {
    "F32": (4, lambda off, zw: [f"VMOVUPS {off}(DI), {zw}"]),
    "F16": (2, lambda off, zw: [f"VCVTPH2PS {off}(DI), {zw}"]),
    "BF16": (2, lambda off, zw: [f"VPMOVZXWD {off}(DI), {zw}", f"VPSLLD $16, {zw}, {zw}"]),
}
AVX2_MAX_ACTS = 6


def avx2_step(tp, nt, u):
    """Value u of the AVX2 kernel: one group's sixteen rows in Y14 (rows
    0..7) and Y15 (8..15), one broadcast per activation row, two fmas."""
    sz, load = AVX2_TYPES[tp]
    L = load(u * 16 * sz, "Y14") + load(u * 16 * sz + 8 * sz, "Y15")
    for t in range(nt):
        yb = "Y12" if t % 2 == 0 else "Y13"
        L += [f"VBROADCASTSS {addr(t, 4*u)}, {yb}",
              f"VFMADD231PS {yb}, Y14, Y{2*t}",
              f"VFMADD231PS {yb}, Y15, Y{2*t+1}"]
    return L


def avx2_kernel(tp, nt):
    """r16fa{T}{nt}(n int, w, a []byte, astride int, out []float32, ostride
    int): the AVX2 twin on one packed group (sixteen rows) by nt activation
    rows, the same chains (one lane, one pair); r16fAVX2 runs it on both
    groups of a call."""
    sz, _ = AVX2_TYPES[tp]
    name = f"r16fa{tp}{nt}"
    args = [f"// func {name}(n int, w, a []byte, astride int, out []float32, ostride int)",
            f"TEXT ·{name}(SB), NOSPLIT, $0-96",
            "MOVQ n+0(FP), CX", "MOVQ w_base+8(FP), DI",
            "MOVQ a_base+32(FP), R8", "MOVQ astride+56(FP), BX"]
    return loop_kernel(name, args, nt, lambda u: avx2_step(tp, nt, u), [("DI", 16 * sz)],
                       [f"VXORPS Y{i}, Y{i}, Y{i}" for i in range(2 * nt)],
                       ["MOVQ out_base+64(FP), AX", "MOVQ ostride+88(FP), BX"],
                       lambda t: [f"VMOVUPS Y{2*t}, (AX)", f"VMOVUPS Y{2*t+1}, 32(AX)"])


def emit(body):
    """Prints a TEXT block: its two header lines, then its body indented (labels not)."""
    print()
    print(body[0])
    print(body[1])
    for l in body[2:]:
        print(l if l.endswith(":") else "\t" + l)


print("// Code generated by gen/r16f.py; DO NOT EDIT.")
print()
print("//go:build amd64 && !noasm")
print()
print('#include "textflag.h"')
print()
print("\n".join(pack_tables()))
emit(pack())
for tp in TYPES:
    for nt in range(1, MAX_ACTS + 1):
        emit(kernel(tp, nt))
for nt in range(1, MAX_ACTS + 1):
    emit(dp_kernel(nt))
for tp in AVX2_TYPES:
    for nt in range(1, AVX2_MAX_ACTS + 1):
        emit(avx2_kernel(tp, nt))
