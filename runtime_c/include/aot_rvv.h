/*
 * microaot RISC-V vector (RVV 1.0) routines: the vector intrinsics of aot/kernel/intrinsics_rvv.py
 * (their specification), called by the RVV schedules (aot/lower/schedule/rvv.py). With
 * __riscv_vector one inline-assembly statement per pair of pixels and block of 32 output channels
 * (the text of aot/kernel/rvv_asm.py: int32 accumulators in LMUL=8 register groups, or LMUL=4
 * for four pixels of up to 16 channels; vsext.vf2 + vwmacc, vector requantization exact to
 * TFLite's two roundings); everywhere else (the host build the QEMU runs are compared with) the same
 * arithmetic in portable C.
 *
 * A parameter table p holds per block of 32 output channels four rows of 32 int32: bias (input
 * offset folded in), multiplier, left shift, minus the right shift; shl bit 0 is clear when no
 * channel shifts left. GCC 12 has no vector register allocation: the statements name the
 * vector registers they use and no C code around them uses V; their general registers are
 * clobbered (t0-t6, a7).
 * C99, static inline only.
 */
#ifndef AOT_RVV_H
#define AOT_RVV_H

#include <stdint.h>

#define AOT_RVV_BLOCK 32

#if defined(__riscv_vector)

#define AOT_RVV_GEMM2 \
    "csrwi vxrm, 0\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m8, ta, ma\n\t" \
    "vle32.v v16, (%3)\n\t" \
    "vmv.v.v v24, v16\n\t" \
    "vsetvli zero, t6, e16, m4, ta, ma\n\t" \
    "mv t1, %0\n\t" \
    "mv t2, %1\n\t" \
    "mv t3, %2\n\t" \
    "lw t0, 0(%6)\n\t" \
    "andi t6, t0, 3\n\t" \
    "beqz t6, 2f\n\t" \
    "1:\n\t" \
    "lb t4, 0(t1)\n\t" \
    "lb t5, 0(t2)\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "addi t3, t3, 32\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vwmacc.vx v16, t4, v4\n\t" \
    "vwmacc.vx v24, t5, v4\n\t" \
    "addi t1, t1, 1\n\t" \
    "addi t2, t2, 1\n\t" \
    "addi t6, t6, -1\n\t" \
    "bnez t6, 1b\n\t" \
    "2:\n\t" \
    "srli t0, t0, 2\n\t" \
    "beqz t0, 4f\n\t" \
    "3:\n\t" \
    "lb t4, 0(t1)\n\t" \
    "lb t5, 0(t2)\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "addi t3, t3, 32\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vwmacc.vx v16, t4, v4\n\t" \
    "vwmacc.vx v24, t5, v4\n\t" \
    "lb t4, 1(t1)\n\t" \
    "lb t5, 1(t2)\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "addi t3, t3, 32\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vwmacc.vx v16, t4, v4\n\t" \
    "vwmacc.vx v24, t5, v4\n\t" \
    "lb t4, 2(t1)\n\t" \
    "lb t5, 2(t2)\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "addi t3, t3, 32\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vwmacc.vx v16, t4, v4\n\t" \
    "vwmacc.vx v24, t5, v4\n\t" \
    "lb t4, 3(t1)\n\t" \
    "lb t5, 3(t2)\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "addi t3, t3, 32\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vwmacc.vx v16, t4, v4\n\t" \
    "vwmacc.vx v24, t5, v4\n\t" \
    "addi t1, t1, 4\n\t" \
    "addi t2, t2, 4\n\t" \
    "addi t0, t0, -1\n\t" \
    "bnez t0, 3b\n\t" \
    "4:\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m8, ta, ma\n\t" \
    "lw t4, 20(%6)\n\t" \
    "beqz t4, 5f\n\t" \
    "addi t5, %3, 256\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsll.vv v16, v16, v8\n\t" \
    "vsll.vv v24, v24, v8\n\t" \
    "5:\n\t" \
    "addi t5, %3, 128\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsmul.vv v16, v16, v8\n\t" \
    "vsmul.vv v24, v24, v8\n\t" \
    "addi t5, %3, 384\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vand.vv v0, v16, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v16, v16, v0\n\t" \
    "vand.vv v0, v24, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v24, v24, v0\n\t" \
    "vrsub.vi v8, v8, 0\n\t" \
    "vssra.vv v16, v16, v8\n\t" \
    "vssra.vv v24, v24, v8\n\t" \
    "lw t4, 8(%6)\n\t" \
    "vadd.vx v16, v16, t4\n\t" \
    "vadd.vx v24, v24, t4\n\t" \
    "lw t4, 12(%6)\n\t" \
    "vmax.vx v16, v16, t4\n\t" \
    "vmax.vx v24, v24, t4\n\t" \
    "lw t4, 16(%6)\n\t" \
    "vmin.vx v16, v16, t4\n\t" \
    "vmin.vx v24, v24, t4\n\t" \
    "vsetvli zero, t6, e16, m4, ta, ma\n\t" \
    "vnsrl.wi v0, v16, 0\n\t" \
    "vnsrl.wi v4, v24, 0\n\t" \
    "vsetvli zero, t6, e8, m2, ta, ma\n\t" \
    "vnsrl.wi v8, v0, 0\n\t" \
    "vnsrl.wi v10, v4, 0\n\t" \
    "vse8.v v8, (%4)\n\t" \
    "vse8.v v10, (%5)"

#define AOT_RVV_GEMM4 \
    "csrwi vxrm, 0\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m4, ta, ma\n\t" \
    "vle32.v v16, (%3)\n\t" \
    "vmv.v.v v20, v16\n\t" \
    "vmv.v.v v24, v16\n\t" \
    "vmv.v.v v28, v16\n\t" \
    "vsetvli zero, t6, e16, m2, ta, ma\n\t" \
    "mv t1, %0\n\t" \
    "add t2, t1, %1\n\t" \
    "add t3, t2, %1\n\t" \
    "add t4, t3, %1\n\t" \
    "mv t5, %2\n\t" \
    "lw t0, 0(%6)\n\t" \
    "andi a7, t0, 3\n\t" \
    "beqz a7, 2f\n\t" \
    "1:\n\t" \
    "vle8.v v0, (t5)\n\t" \
    "addi t5, t5, 32\n\t" \
    "vsext.vf2 v2, v0\n\t" \
    "lb t6, 0(t1)\n\t" \
    "vwmacc.vx v16, t6, v2\n\t" \
    "lb t6, 0(t2)\n\t" \
    "vwmacc.vx v20, t6, v2\n\t" \
    "lb t6, 0(t3)\n\t" \
    "vwmacc.vx v24, t6, v2\n\t" \
    "lb t6, 0(t4)\n\t" \
    "vwmacc.vx v28, t6, v2\n\t" \
    "addi t1, t1, 1\n\t" \
    "addi t2, t2, 1\n\t" \
    "addi t3, t3, 1\n\t" \
    "addi t4, t4, 1\n\t" \
    "addi a7, a7, -1\n\t" \
    "bnez a7, 1b\n\t" \
    "2:\n\t" \
    "srli t0, t0, 2\n\t" \
    "beqz t0, 4f\n\t" \
    "3:\n\t" \
    "vle8.v v0, (t5)\n\t" \
    "addi t5, t5, 32\n\t" \
    "vsext.vf2 v2, v0\n\t" \
    "lb t6, 0(t1)\n\t" \
    "vwmacc.vx v16, t6, v2\n\t" \
    "lb t6, 0(t2)\n\t" \
    "vwmacc.vx v20, t6, v2\n\t" \
    "lb t6, 0(t3)\n\t" \
    "vwmacc.vx v24, t6, v2\n\t" \
    "lb t6, 0(t4)\n\t" \
    "vwmacc.vx v28, t6, v2\n\t" \
    "vle8.v v0, (t5)\n\t" \
    "addi t5, t5, 32\n\t" \
    "vsext.vf2 v2, v0\n\t" \
    "lb t6, 1(t1)\n\t" \
    "vwmacc.vx v16, t6, v2\n\t" \
    "lb t6, 1(t2)\n\t" \
    "vwmacc.vx v20, t6, v2\n\t" \
    "lb t6, 1(t3)\n\t" \
    "vwmacc.vx v24, t6, v2\n\t" \
    "lb t6, 1(t4)\n\t" \
    "vwmacc.vx v28, t6, v2\n\t" \
    "vle8.v v0, (t5)\n\t" \
    "addi t5, t5, 32\n\t" \
    "vsext.vf2 v2, v0\n\t" \
    "lb t6, 2(t1)\n\t" \
    "vwmacc.vx v16, t6, v2\n\t" \
    "lb t6, 2(t2)\n\t" \
    "vwmacc.vx v20, t6, v2\n\t" \
    "lb t6, 2(t3)\n\t" \
    "vwmacc.vx v24, t6, v2\n\t" \
    "lb t6, 2(t4)\n\t" \
    "vwmacc.vx v28, t6, v2\n\t" \
    "vle8.v v0, (t5)\n\t" \
    "addi t5, t5, 32\n\t" \
    "vsext.vf2 v2, v0\n\t" \
    "lb t6, 3(t1)\n\t" \
    "vwmacc.vx v16, t6, v2\n\t" \
    "lb t6, 3(t2)\n\t" \
    "vwmacc.vx v20, t6, v2\n\t" \
    "lb t6, 3(t3)\n\t" \
    "vwmacc.vx v24, t6, v2\n\t" \
    "lb t6, 3(t4)\n\t" \
    "vwmacc.vx v28, t6, v2\n\t" \
    "addi t1, t1, 4\n\t" \
    "addi t2, t2, 4\n\t" \
    "addi t3, t3, 4\n\t" \
    "addi t4, t4, 4\n\t" \
    "addi t0, t0, -1\n\t" \
    "bnez t0, 3b\n\t" \
    "4:\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m4, ta, ma\n\t" \
    "lw t4, 20(%6)\n\t" \
    "beqz t4, 5f\n\t" \
    "addi t5, %3, 256\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsll.vv v16, v16, v8\n\t" \
    "vsll.vv v20, v20, v8\n\t" \
    "vsll.vv v24, v24, v8\n\t" \
    "vsll.vv v28, v28, v8\n\t" \
    "5:\n\t" \
    "addi t5, %3, 128\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsmul.vv v16, v16, v8\n\t" \
    "vsmul.vv v20, v20, v8\n\t" \
    "vsmul.vv v24, v24, v8\n\t" \
    "vsmul.vv v28, v28, v8\n\t" \
    "addi t5, %3, 384\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vand.vv v0, v16, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v16, v16, v0\n\t" \
    "vand.vv v0, v20, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v20, v20, v0\n\t" \
    "vand.vv v0, v24, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v24, v24, v0\n\t" \
    "vand.vv v0, v28, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v28, v28, v0\n\t" \
    "vrsub.vi v8, v8, 0\n\t" \
    "vssra.vv v16, v16, v8\n\t" \
    "vssra.vv v20, v20, v8\n\t" \
    "vssra.vv v24, v24, v8\n\t" \
    "vssra.vv v28, v28, v8\n\t" \
    "lw t4, 8(%6)\n\t" \
    "vadd.vx v16, v16, t4\n\t" \
    "vadd.vx v20, v20, t4\n\t" \
    "vadd.vx v24, v24, t4\n\t" \
    "vadd.vx v28, v28, t4\n\t" \
    "lw t4, 12(%6)\n\t" \
    "vmax.vx v16, v16, t4\n\t" \
    "vmax.vx v20, v20, t4\n\t" \
    "vmax.vx v24, v24, t4\n\t" \
    "vmax.vx v28, v28, t4\n\t" \
    "lw t4, 16(%6)\n\t" \
    "vmin.vx v16, v16, t4\n\t" \
    "vmin.vx v20, v20, t4\n\t" \
    "vmin.vx v24, v24, t4\n\t" \
    "vmin.vx v28, v28, t4\n\t" \
    "vsetvli zero, t6, e16, m2, ta, ma\n\t" \
    "vnsrl.wi v0, v16, 0\n\t" \
    "vnsrl.wi v2, v20, 0\n\t" \
    "vnsrl.wi v4, v24, 0\n\t" \
    "vnsrl.wi v6, v28, 0\n\t" \
    "vsetvli zero, t6, e8, m1, ta, ma\n\t" \
    "vnsrl.wi v8, v0, 0\n\t" \
    "vnsrl.wi v9, v2, 0\n\t" \
    "vnsrl.wi v10, v4, 0\n\t" \
    "vnsrl.wi v11, v6, 0\n\t" \
    "mv t1, %4\n\t" \
    "vse8.v v8, (t1)\n\t" \
    "add t1, t1, %5\n\t" \
    "vse8.v v9, (t1)\n\t" \
    "add t1, t1, %5\n\t" \
    "vse8.v v10, (t1)\n\t" \
    "add t1, t1, %5\n\t" \
    "vse8.v v11, (t1)"

#define AOT_RVV_DW2 \
    "csrwi vxrm, 0\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m8, ta, ma\n\t" \
    "vle32.v v16, (%3)\n\t" \
    "vmv.v.v v24, v16\n\t" \
    "vsetvli zero, t6, e16, m4, ta, ma\n\t" \
    "mv t1, %0\n\t" \
    "mv t2, %1\n\t" \
    "mv t3, %2\n\t" \
    "lw t0, 0(%6)\n\t" \
    "lw t5, 28(%6)\n\t" \
    "lw t6, 32(%6)\n\t" \
    "1:\n\t" \
    "lw t4, 24(%6)\n\t" \
    "2:\n\t" \
    "vle8.v v0, (t1)\n\t" \
    "vsext.vf2 v4, v0\n\t" \
    "vle8.v v0, (t2)\n\t" \
    "vsext.vf2 v8, v0\n\t" \
    "vle8.v v0, (t3)\n\t" \
    "vsext.vf2 v12, v0\n\t" \
    "vwmacc.vv v16, v4, v12\n\t" \
    "vwmacc.vv v24, v8, v12\n\t" \
    "add t1, t1, t5\n\t" \
    "add t2, t2, t5\n\t" \
    "add t3, t3, t6\n\t" \
    "addi t4, t4, -1\n\t" \
    "bnez t4, 2b\n\t" \
    "lw t4, 36(%6)\n\t" \
    "add t1, t1, t4\n\t" \
    "add t2, t2, t4\n\t" \
    "addi t0, t0, -1\n\t" \
    "bnez t0, 1b\n\t" \
    "lw t6, 4(%6)\n\t" \
    "vsetvli zero, t6, e32, m8, ta, ma\n\t" \
    "lw t4, 20(%6)\n\t" \
    "beqz t4, 5f\n\t" \
    "addi t5, %3, 256\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsll.vv v16, v16, v8\n\t" \
    "vsll.vv v24, v24, v8\n\t" \
    "5:\n\t" \
    "addi t5, %3, 128\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vsmul.vv v16, v16, v8\n\t" \
    "vsmul.vv v24, v24, v8\n\t" \
    "addi t5, %3, 384\n\t" \
    "vle32.v v8, (t5)\n\t" \
    "vand.vv v0, v16, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v16, v16, v0\n\t" \
    "vand.vv v0, v24, v8\n\t" \
    "vsra.vi v0, v0, 31\n\t" \
    "vsadd.vv v24, v24, v0\n\t" \
    "vrsub.vi v8, v8, 0\n\t" \
    "vssra.vv v16, v16, v8\n\t" \
    "vssra.vv v24, v24, v8\n\t" \
    "lw t4, 8(%6)\n\t" \
    "vadd.vx v16, v16, t4\n\t" \
    "vadd.vx v24, v24, t4\n\t" \
    "lw t4, 12(%6)\n\t" \
    "vmax.vx v16, v16, t4\n\t" \
    "vmax.vx v24, v24, t4\n\t" \
    "lw t4, 16(%6)\n\t" \
    "vmin.vx v16, v16, t4\n\t" \
    "vmin.vx v24, v24, t4\n\t" \
    "vsetvli zero, t6, e16, m4, ta, ma\n\t" \
    "vnsrl.wi v0, v16, 0\n\t" \
    "vnsrl.wi v4, v24, 0\n\t" \
    "vsetvli zero, t6, e8, m2, ta, ma\n\t" \
    "vnsrl.wi v8, v0, 0\n\t" \
    "vnsrl.wi v10, v4, 0\n\t" \
    "vse8.v v8, (%4)\n\t" \
    "vse8.v v10, (%5)"

#define AOT_RVV_ADD \
    "csrwi vxrm, 0\n\t" \
    "mv t0, %4\n\t" \
    "mv t1, %1\n\t" \
    "mv t2, %2\n\t" \
    "mv t3, %0\n\t" \
    "lw t6, 44(%3)\n\t" \
    "1:\n\t" \
    "vsetvli t4, t0, e32, m8, ta, ma\n\t" \
    "vle8.v v0, (t1)\n\t" \
    "vsext.vf4 v8, v0\n\t" \
    "vle8.v v0, (t2)\n\t" \
    "vsext.vf4 v16, v0\n\t" \
    "lw t5, 0(%3)\n\t" \
    "vadd.vx v8, v8, t5\n\t" \
    "vsll.vx v8, v8, t6\n\t" \
    "lw t5, 12(%3)\n\t" \
    "vadd.vx v16, v16, t5\n\t" \
    "vsll.vx v16, v16, t6\n\t" \
    "lw t5, 4(%3)\n\t" \
    "vsmul.vx v8, v8, t5\n\t" \
    "lw t5, 8(%3)\n\t" \
    "beqz t5, 2f\n\t" \
    "vsra.vi v24, v8, 31\n\t" \
    "vsadd.vv v8, v8, v24\n\t" \
    "vssra.vx v8, v8, t5\n\t" \
    "2:\n\t" \
    "lw t5, 16(%3)\n\t" \
    "vsmul.vx v16, v16, t5\n\t" \
    "lw t5, 20(%3)\n\t" \
    "beqz t5, 3f\n\t" \
    "vsra.vi v24, v16, 31\n\t" \
    "vsadd.vv v16, v16, v24\n\t" \
    "vssra.vx v16, v16, t5\n\t" \
    "3:\n\t" \
    "lw t5, 48(%3)\n\t" \
    "bnez t5, 4f\n\t" \
    "vadd.vv v8, v8, v16\n\t" \
    "j 5f\n\t" \
    "4:\n\t" \
    "vsub.vv v8, v8, v16\n\t" \
    "5:\n\t" \
    "lw t5, 24(%3)\n\t" \
    "vsmul.vx v8, v8, t5\n\t" \
    "lw t5, 28(%3)\n\t" \
    "beqz t5, 6f\n\t" \
    "vsra.vi v24, v8, 31\n\t" \
    "vsadd.vv v8, v8, v24\n\t" \
    "vssra.vx v8, v8, t5\n\t" \
    "6:\n\t" \
    "lw t5, 32(%3)\n\t" \
    "vadd.vx v8, v8, t5\n\t" \
    "lw t5, 36(%3)\n\t" \
    "vmax.vx v8, v8, t5\n\t" \
    "lw t5, 40(%3)\n\t" \
    "vmin.vx v8, v8, t5\n\t" \
    "vsetvli zero, t4, e16, m4, ta, ma\n\t" \
    "vnsrl.wi v0, v8, 0\n\t" \
    "vsetvli zero, t4, e8, m2, ta, ma\n\t" \
    "vnsrl.wi v4, v0, 0\n\t" \
    "vse8.v v4, (t3)\n\t" \
    "add t1, t1, t4\n\t" \
    "add t2, t2, t4\n\t" \
    "add t3, t3, t4\n\t" \
    "sub t0, t0, t4\n\t" \
    "bnez t0, 1b"

#define AOT_RVV_STEP(text, x0, x1, w, p, o0, o1, cfg)                                               \
    __asm__ volatile(text : : "r"(x0), "r"(x1), "r"(w), "r"(p), "r"(o0), "r"(o1), "r"(cfg)               \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a7", "memory")

/* n bytes (n >= 0) from s to d / of value v at d, 128 bytes per vector step (e8, LMUL 8) */
static inline void aot_rvv_copy(int8_t *d, const int8_t *s, int32_t n) {
    if (n > 0) {
        __asm__ volatile("1:\n\tvsetvli t0, %2, e8, m8, ta, ma\n\tvle8.v v0, (%1)\n\tvse8.v v0, (%0)\n\t"
                         "add %0, %0, t0\n\tadd %1, %1, t0\n\tsub %2, %2, t0\n\tbnez %2, 1b"
                         : "+r"(d), "+r"(s), "+r"(n) : : "t0", "memory");
    }
}

static inline void aot_rvv_fill(int8_t *d, int32_t v, int32_t n) {
    if (n > 0) {
        __asm__ volatile("vsetvli t0, zero, e8, m8, ta, ma\n\tvmv.v.x v0, %2\n\t"
                         "1:\n\tvsetvli t0, %1, e8, m8, ta, ma\n\tvse8.v v0, (%0)\n\t"
                         "add %0, %0, t0\n\tsub %1, %1, t0\n\tbnez %1, 1b"
                         : "+r"(d), "+r"(n) : "r"(v) : "t0", "memory");
    }
}

/* every output channel (OC) of npix pixels (pixel q: input x + q*xs, output out + q*os) over
   n reduction steps, two pixels per step (an odd last pixel computed twice and stored once) */
static inline void aot_rvv_gemm(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                int32_t amax, int32_t shl) {
    int32_t cfg[6] = {n, 0, zp, amin, amax, shl & 1};
    const int32_t wblock = n * AOT_RVV_BLOCK;
    int32_t q = 0;
    if (OC <= AOT_RVV_BLOCK / 2) { /* one block of up to 16 channels: four pixels per step (LMUL 4) */
        cfg[1] = OC;
        for (; q + 4 <= npix; q += 4) {
            AOT_RVV_STEP(AOT_RVV_GEMM4, x + q * xs, xs, w, p, out + q * os, os, cfg);
        }
    }
    for (; q < npix; q += 2) {
        const int8_t *x0 = x + q * xs;
        const int8_t *x1 = q + 1 < npix ? x0 + xs : x0;
        int8_t *o0 = out + q * os;
        int8_t *o1 = q + 1 < npix ? o0 + os : o0;
        const int8_t *wb = w;
        for (int32_t b = 0; b < OC; b += AOT_RVV_BLOCK) {
            cfg[1] = OC - b < AOT_RVV_BLOCK ? OC - b : AOT_RVV_BLOCK;
            AOT_RVV_STEP(AOT_RVV_GEMM2, x0, x1, wb, p + 4 * b, o0 + b, o1 + b, cfg);
            wb += wblock;
        }
    }
}

/* TFLite's int8 ADD / SUB of n elements (the table: aot/kernel/intrinsics_rvv.py add_table); an
   input may be the output (each element is read before it is written) */
static inline void aot_rvv_add(int8_t *out, const int8_t *a, const int8_t *b, const int32_t *p, int32_t n) {
    if (n > 0) {
        __asm__ volatile(AOT_RVV_ADD : : "r"(out), "r"(a), "r"(b), "r"(p), "r"(n)
                         : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "memory");
    }
}

#else /* portable C */

static inline void aot_rvv_add(int8_t *out, const int8_t *a, const int8_t *b, const int32_t *p, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        int32_t sa = aot_requantize((int32_t)((uint32_t)((int32_t)a[i] + p[0]) << p[11]), p[1], -p[2]);
        int32_t sb = aot_requantize((int32_t)((uint32_t)((int32_t)b[i] + p[3]) << p[11]), p[4], -p[5]);
        int32_t raw = (int32_t)(p[12] ? (uint32_t)sa - (uint32_t)sb : (uint32_t)sa + (uint32_t)sb);
        int32_t v = aot_requantize(raw, p[6], -p[7]) + p[8];
        out[i] = (int8_t)(v < p[9] ? p[9] : (v > p[10] ? p[10] : v));
    }
}

static inline int32_t aot_rvv_rq1(int32_t acc, const int32_t *pc, int32_t zp, int32_t amin, int32_t amax) {
    const int32_t left = pc[2 * AOT_RVV_BLOCK];
    int32_t v = aot_requantize(acc, pc[AOT_RVV_BLOCK], left > 0 ? left : pc[3 * AOT_RVV_BLOCK]) + zp;
    return v < amin ? amin : (v > amax ? amax : v);
}

static inline void aot_rvv_copy(int8_t *d, const int8_t *s, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        d[i] = s[i];
    }
}

static inline void aot_rvv_fill(int8_t *d, int32_t v, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        d[i] = (int8_t)v;
    }
}

static inline void aot_rvv_gemm(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                int32_t amax, int32_t shl) {
    (void)shl;
    for (int32_t q = 0; q < npix; q++) {
        for (int32_t c = 0; c < OC; c++) {
            const int32_t *pc = p + (c / AOT_RVV_BLOCK) * 4 * AOT_RVV_BLOCK + c % AOT_RVV_BLOCK;
            const int8_t *wc = w + (c / AOT_RVV_BLOCK) * n * AOT_RVV_BLOCK + c % AOT_RVV_BLOCK;
            int32_t acc = pc[0];
            for (int32_t k = 0; k < n; k++) {
                acc += (int32_t)x[q * xs + k] * (int32_t)wc[k * AOT_RVV_BLOCK];
            }
            out[q * os + c] = (int8_t)aot_rvv_rq1(acc, pc, zp, amin, amax);
        }
    }
}

#endif /* __riscv_vector */

/* the depthwise line buffer: [kh][LW][C], the window's input rows from column -pl, the padding
   as zp_in */
static inline void aot_rvv_lines(int8_t *lb, const int8_t *x, int32_t C, int32_t H, int32_t W, int32_t kh,
                                 int32_t dh, int32_t iy0, int32_t pl, int32_t LW, int32_t zp_in) {
    const int32_t j0 = pl > 0 ? (pl < LW ? pl : LW) : 0;
    const int32_t j1 = W + pl < LW ? W + pl : LW;
    for (int32_t r = 0; r < kh; r++) {
        const int32_t iy = iy0 + r * dh;
        int8_t *dst = lb + r * LW * C;
        if (iy < 0 || iy >= H || j1 <= j0) {
            aot_rvv_fill(dst, zp_in, LW * C);
        } else {
            aot_rvv_fill(dst, zp_in, j0 * C);
            aot_rvv_copy(dst + j0 * C, x + (iy * W + j0 - pl) * C, (j1 - j0) * C);
            aot_rvv_fill(dst + j1 * C, zp_in, (LW - j1) * C);
        }
    }
}

/* depthwise (multiplier 1), one output row of OW pixels, every channel; weights [kh][kw][C] */
static inline void aot_rvv_dw_row(int8_t *out, int8_t *lb, const int8_t *x, const int8_t *w, const int32_t *p,
                                  int32_t C, int32_t H, int32_t W, int32_t kh, int32_t kw, int32_t dh, int32_t dw,
                                  int32_t sw, int32_t iy0, int32_t pl, int32_t OW, int32_t zp_in, int32_t zp,
                                  int32_t amin, int32_t amax, int32_t shl) {
    const int32_t LW = (OW - 1) * sw + (kw - 1) * dw + 1;
    aot_rvv_lines(lb, x, C, H, W, kh, dh, iy0, pl, LW, zp_in);
#if defined(__riscv_vector)
    int32_t cfg[10] = {kh, 0, zp, amin, amax, shl & 1, kw, dw * C, C, LW * C - kw * dw * C};
    for (int32_t ox = 0; ox < OW; ox += 2) {
        const int8_t *x0 = lb + ox * sw * C;
        const int8_t *x1 = ox + 1 < OW ? x0 + sw * C : x0;
        int8_t *o0 = out + ox * C;
        int8_t *o1 = ox + 1 < OW ? o0 + C : o0;
        for (int32_t b = 0; b < C; b += AOT_RVV_BLOCK) {
            cfg[1] = C - b < AOT_RVV_BLOCK ? C - b : AOT_RVV_BLOCK;
            AOT_RVV_STEP(AOT_RVV_DW2, x0 + b, x1 + b, w + b, p + 4 * b, o0 + b, o1 + b, cfg);
        }
    }
#else
    (void)shl;
    for (int32_t ox = 0; ox < OW; ox++) {
        for (int32_t c = 0; c < C; c++) {
            const int32_t *pc = p + (c / AOT_RVV_BLOCK) * 4 * AOT_RVV_BLOCK + c % AOT_RVV_BLOCK;
            int32_t acc = pc[0];
            for (int32_t ky = 0; ky < kh; ky++) {
                for (int32_t kx = 0; kx < kw; kx++) {
                    acc += (int32_t)lb[(ky * LW + ox * sw + kx * dw) * C + c] * (int32_t)w[(ky * kw + kx) * C + c];
                }
            }
            out[ox * C + c] = (int8_t)aot_rvv_rq1(acc, pc, zp, amin, amax);
        }
    }
#endif
}

#endif /* AOT_RVV_H */
