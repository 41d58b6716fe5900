"""The RVV 1.0 assembly of the vector routines (aot.kernel.intrinsics_rvv) in the C backend: one
text per inner step, which runtime_c/include/aot_rvv.h holds as the string literal `c_literal`
writes (a test checks the two agree). (The LLVM backend cannot take inline assembly on RISC-V:
llvmlite's LLVM has no RISC-V assembly parser; aot.llvm.rvv writes vector IR instead.)

Both steps take seven operands in general registers, read only: %0 and %1 the two pixels'
inputs (the same pixel twice for an odd last one; GEMM4: %0 the first of four pixels, %1 the
stride between them, %4 / %5 likewise for the outputs), %2 the weights of the channel block, %3 its
parameter table block (bias, multiplier, left shift, minus right shift: rows of 32 int32),
%4 and %5 the two pixels' outputs, %6 a small int32 table: [0] the reduction length (gemm) or
kh (depthwise), [1] vl (channels of the block, 1..32), [2] the output zero point, [3] / [4]
the clamp, [5] 1 when some channel shifts left; depthwise also [6] kw, [7] the tap stride
(dw * C bytes), [8] C (the weights' tap stride), [9] the line stride less kw tap strides.
They use t0-t6 and a7 and the vector registers v0-v31 (v16-v23 / v24-v31: the two pixels' int32
accumulators, LMUL 8), and set vxrm to round-to-nearest-up. VLEN >= 128: 32 int32 lanes per
LMUL=8 group at every vl the tables give.
"""
from __future__ import annotations

CLOBBERS = ("t0", "t1", "t2", "t3", "t4", "t5", "t6", "a7")

_HEAD = """csrwi vxrm, 0
lw t6, 4(%6)
vsetvli zero, t6, e32, m8, ta, ma
vle32.v v16, (%3)
vmv.v.v v24, v16
vsetvli zero, t6, e16, m4, ta, ma
mv t1, %0
mv t2, %1
mv t3, %2
lw t0, 0(%6)"""

def _requant(accs: tuple[int, ...], lmul: int, outs: str) -> str:
    """Requantize the accumulator groups `accs` (int32, LMUL lmul; TFLite's two roundings), + zp,
    clamp, narrow to int8 and store them (`outs`: the stores, narrowed bytes in v8, v8+lmul/4, ...)."""
    m, (h, q) = f"m{lmul}", {8: ("m4", "m2"), 4: ("m2", "m1")}[lmul]
    lines = ["lw t6, 4(%6)", f"vsetvli zero, t6, e32, {m}, ta, ma", "lw t4, 20(%6)", "beqz t4, 5f",
             "addi t5, %3, 256", "vle32.v v8, (t5)"]
    lines += [f"vsll.vv v{a}, v{a}, v8" for a in accs]
    lines += ["5:", "addi t5, %3, 128", "vle32.v v8, (t5)"]
    lines += [f"vsmul.vv v{a}, v{a}, v8" for a in accs]
    lines += ["addi t5, %3, 384", "vle32.v v8, (t5)"]
    for a in accs:
        lines += [f"vand.vv v0, v{a}, v8", "vsra.vi v0, v0, 31", f"vsadd.vv v{a}, v{a}, v0"]
    lines += ["vrsub.vi v8, v8, 0"] + [f"vssra.vv v{a}, v{a}, v8" for a in accs]
    for off, op in ((8, "vadd"), (12, "vmax"), (16, "vmin")):
        lines += [f"lw t4, {off}(%6)"] + [f"{op}.vx v{a}, v{a}, t4" for a in accs]
    half = lmul // 2
    lines += [f"vsetvli zero, t6, e16, {h}, ta, ma"]
    lines += [f"vnsrl.wi v{i * half}, v{a}, 0" for i, a in enumerate(accs)]
    lines += [f"vsetvli zero, t6, e8, {q}, ta, ma"]
    lines += [f"vnsrl.wi v{8 + i * (lmul // 4)}, v{i * half}, 0" for i in range(len(accs))]
    return "\n".join(lines) + "\n" + outs


# requantize both accumulators of a pair (LMUL 8), store the two pixels' bytes
_REQUANT = _requant((16, 24), 8, "vse8.v v8, (%4)\nvse8.v v10, (%5)")


def _gemm_step(k: int) -> str:
    return f"""lb t4, {k}(t1)
lb t5, {k}(t2)
vle8.v v0, (t3)
addi t3, t3, 32
vsext.vf2 v4, v0
vwmacc.vx v16, t4, v4
vwmacc.vx v24, t5, v4"""


# two pixels x one block of up to 32 output channels over n reduction steps: n % 4 single
# steps, then four per loop iteration
GEMM2 = "\n".join((
    _HEAD,
    "andi t6, t0, 3",
    "beqz t6, 2f",
    "1:",
    _gemm_step(0),
    "addi t1, t1, 1\naddi t2, t2, 1\naddi t6, t6, -1\nbnez t6, 1b",
    "2:",
    "srli t0, t0, 2",
    "beqz t0, 4f",
    "3:",
    *(_gemm_step(k) for k in range(4)),
    "addi t1, t1, 4\naddi t2, t2, 4\naddi t0, t0, -1\nbnez t0, 3b",
    "4:",
    _REQUANT,
))

def _gemm4_step(k: int) -> str:
    return "\n".join([f"vle8.v v0, (t5)", "addi t5, t5, 32", "vsext.vf2 v2, v0"]
                     + [f"lb t6, {k}(t{i + 1})\nvwmacc.vx v{16 + 4 * i}, t6, v2" for i in range(4)])


# four pixels (%0 + i * %1; outputs %4 + i * %5) x one block of up to 16 output channels (LMUL 4)
GEMM4 = "\n".join((
    """csrwi vxrm, 0
lw t6, 4(%6)
vsetvli zero, t6, e32, m4, ta, ma
vle32.v v16, (%3)
vmv.v.v v20, v16
vmv.v.v v24, v16
vmv.v.v v28, v16
vsetvli zero, t6, e16, m2, ta, ma
mv t1, %0
add t2, t1, %1
add t3, t2, %1
add t4, t3, %1
mv t5, %2
lw t0, 0(%6)
andi a7, t0, 3
beqz a7, 2f
1:""",
    _gemm4_step(0),
    "addi t1, t1, 1\naddi t2, t2, 1\naddi t3, t3, 1\naddi t4, t4, 1\naddi a7, a7, -1\nbnez a7, 1b",
    "2:",
    "srli t0, t0, 2",
    "beqz t0, 4f",
    "3:",
    *(_gemm4_step(k) for k in range(4)),
    "addi t1, t1, 4\naddi t2, t2, 4\naddi t3, t3, 4\naddi t4, t4, 4\naddi t0, t0, -1\nbnez t0, 3b",
    "4:",
    _requant((16, 20, 24, 28), 4, "mv t1, %4\nvse8.v v8, (t1)\nadd t1, t1, %5\nvse8.v v9, (t1)\n"
             "add t1, t1, %5\nvse8.v v10, (t1)\nadd t1, t1, %5\nvse8.v v11, (t1)"),
))

# two pixels x one block of up to 32 channels of a depthwise window read from the line buffer
DW2 = "\n".join((
    _HEAD,
    "lw t5, 28(%6)",
    "lw t6, 32(%6)",
    "1:",
    "lw t4, 24(%6)",
    "2:",
    """vle8.v v0, (t1)
vsext.vf2 v4, v0
vle8.v v0, (t2)
vsext.vf2 v8, v0
vle8.v v0, (t3)
vsext.vf2 v12, v0
vwmacc.vv v16, v4, v12
vwmacc.vv v24, v8, v12
add t1, t1, t5
add t2, t2, t5
add t3, t3, t6
addi t4, t4, -1
bnez t4, 2b
lw t4, 36(%6)
add t1, t1, t4
add t2, t2, t4
addi t0, t0, -1
bnez t0, 1b""",
    _REQUANT,
))

def _rescale(v: int, mult: int, right: int, label: int) -> str:
    """v (LMUL 8) = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(v, table[mult]), table[right])."""
    return "\n".join((f"lw t5, {4 * mult}(%3)", f"vsmul.vx v{v}, v{v}, t5", f"lw t5, {4 * right}(%3)",
                      f"beqz t5, {label}f", f"vsra.vi v24, v{v}, 31", f"vsadd.vv v{v}, v{v}, v24",
                      f"vssra.vx v{v}, v{v}, t5", f"{label}:"))


# TFLite's int8 ADD / SUB of %4 (> 0) elements: %0 the output, %1 and %2 the inputs, %3 the table
# of aot.kernel.intrinsics_rvv.add_table; 32 int32 lanes (LMUL 8) per iteration
ADD = "\n".join((
    """csrwi vxrm, 0
mv t0, %4
mv t1, %1
mv t2, %2
mv t3, %0
lw t6, 44(%3)
1:
vsetvli t4, t0, e32, m8, ta, ma
vle8.v v0, (t1)
vsext.vf4 v8, v0
vle8.v v0, (t2)
vsext.vf4 v16, v0
lw t5, 0(%3)
vadd.vx v8, v8, t5
vsll.vx v8, v8, t6
lw t5, 12(%3)
vadd.vx v16, v16, t5
vsll.vx v16, v16, t6""",
    _rescale(8, 1, 2, 2),
    _rescale(16, 4, 5, 3),
    """lw t5, 48(%3)
bnez t5, 4f
vadd.vv v8, v8, v16
j 5f
4:
vsub.vv v8, v8, v16
5:""",
    _rescale(8, 6, 7, 6),
    """lw t5, 32(%3)
vadd.vx v8, v8, t5
lw t5, 36(%3)
vmax.vx v8, v8, t5
lw t5, 40(%3)
vmin.vx v8, v8, t5
vsetvli zero, t4, e16, m4, ta, ma
vnsrl.wi v0, v8, 0
vsetvli zero, t4, e8, m2, ta, ma
vnsrl.wi v4, v0, 0
vse8.v v4, (t3)
add t1, t1, t4
add t2, t2, t4
add t3, t3, t4
sub t0, t0, t4
bnez t0, 1b""",
))

ROUTINES = {"AOT_RVV_GEMM2": GEMM2, "AOT_RVV_GEMM4": GEMM4, "AOT_RVV_DW2": DW2, "AOT_RVV_ADD": ADD}


def c_literal(name: str) -> str:
    """`#define NAME "line\\n\\t" ...` as the C header holds it."""
    lines = ROUTINES[name].split("\n")
    body = " \\\n".join(f'    "{ln}\\n\\t"' if i < len(lines) - 1 else f'    "{ln}"' for i, ln in enumerate(lines))
    return f"#define {name} \\\n{body}\n"
