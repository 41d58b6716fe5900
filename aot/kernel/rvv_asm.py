"""The RVV 1.0 assembly of the vector routines (aot.kernel.intrinsics_rvv): one text per inner
step, shared by the C header (runtime_c/include/aot_rvv.h holds it as the string literal
`c_literal` writes; a test checks the two agree) and the LLVM backend (aot.llvm.rvv, as LLVM
inline asm: `llvm_text`).

Both steps take seven operands in general registers, read only: %0 and %1 the two pixels'
inputs (the same pixel twice for an odd last one), %2 the weights of the channel block, %3 its
parameter table block (bias, multiplier, left shift, minus right shift: rows of 32 int32),
%4 and %5 the two pixels' outputs, %6 a small int32 table: [0] the reduction length (gemm) or
kh (depthwise), [1] vl (channels of the block, 1..32), [2] the output zero point, [3] / [4]
the clamp, [5] 1 when some channel shifts left; depthwise also [6] kw, [7] the tap stride
(dw * C bytes), [8] C (the weights' tap stride), [9] the line stride less kw tap strides.
They use t0-t6 and the vector registers v0-v31 (v16-v23 / v24-v31: the two pixels' int32
accumulators, LMUL 8), and set vxrm to round-to-nearest-up. VLEN >= 128: 32 int32 lanes per
LMUL=8 group at every vl the tables give.
"""
from __future__ import annotations

import re

CLOBBERS = ("t0", "t1", "t2", "t3", "t4", "t5", "t6")

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

# requantize both accumulators (TFLite's two roundings), + zp, clamp, narrow to int8, store
_REQUANT = """lw t6, 4(%6)
vsetvli zero, t6, e32, m8, ta, ma
lw t4, 20(%6)
beqz t4, 5f
addi t5, %3, 256
vle32.v v8, (t5)
vsll.vv v16, v16, v8
vsll.vv v24, v24, v8
5:
addi t5, %3, 128
vle32.v v8, (t5)
vsmul.vv v16, v16, v8
vsmul.vv v24, v24, v8
addi t5, %3, 384
vle32.v v8, (t5)
vand.vv v0, v16, v8
vsra.vi v0, v0, 31
vsadd.vv v16, v16, v0
vand.vv v0, v24, v8
vsra.vi v0, v0, 31
vsadd.vv v24, v24, v0
vrsub.vi v8, v8, 0
vssra.vv v16, v16, v8
vssra.vv v24, v24, v8
lw t4, 8(%6)
vadd.vx v16, v16, t4
vadd.vx v24, v24, t4
lw t4, 12(%6)
vmax.vx v16, v16, t4
vmax.vx v24, v24, t4
lw t4, 16(%6)
vmin.vx v16, v16, t4
vmin.vx v24, v24, t4
vsetvli zero, t6, e16, m4, ta, ma
vnsrl.wi v0, v16, 0
vnsrl.wi v4, v24, 0
vsetvli zero, t6, e8, m2, ta, ma
vnsrl.wi v8, v0, 0
vnsrl.wi v10, v4, 0
vse8.v v8, (%4)
vse8.v v10, (%5)"""


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

ROUTINES = {"AOT_RVV_GEMM2": GEMM2, "AOT_RVV_DW2": DW2}


def c_literal(name: str) -> str:
    """`#define NAME "line\\n\\t" ...` as the C header holds it."""
    lines = ROUTINES[name].split("\n")
    body = " \\\n".join(f'    "{ln}\\n\\t"' if i < len(lines) - 1 else f'    "{ln}"' for i, ln in enumerate(lines))
    return f"#define {name} \\\n{body}\n"


def llvm_text(name: str) -> str:
    """The routine's text as LLVM inline asm (operands $0..$6, a literal $ doubled)."""
    return re.sub(r"%(\d)", r"$\1", ROUTINES[name].replace("$", "$$"))
