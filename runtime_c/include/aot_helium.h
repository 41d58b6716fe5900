/*
 * microaot Helium (MVE) routines: the vector intrinsics of aot/kernel/intrinsics_mve.py (their
 * specification), called by the Cortex-M55 schedules (aot/lower/schedule/helium.py). With
 * __ARM_FEATURE_MVE they use arm_mve.h (16-lane VMLADAVA dot products with predicated tails,
 * 4-lane requantization: VQRDMULH + rounding shift, exactly TFLite's two roundings); everywhere
 * else (the host build the QEMU runs are compared with) the same arithmetic in portable C.
 *
 * Reference arguments point into buffers; a parameter table `p` holds per block of `ps` output
 * channels four rows of ps int32: bias (input offset folded in), multiplier, left shift, minus
 * the right shift; the last argument `shl` is 0 when no channel shifts left (the MVE code then
 * skips that shift).
 * C99, static inline only.
 */
#ifndef AOT_HELIUM_H
#define AOT_HELIUM_H

#include <stddef.h>
#include <stdint.h>

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>

/* four dot-product steps against one input vector: the next 4 x 16 weight bytes at wp (advanced
   by 64), one VMLADAVA each. Assembly: gcc spills and shuffles the even accumulator registers
   VMLADAVA needs and recomputes every weight address when left to itself. */
#if defined(__GNUC__) && !defined(__clang__) /* "Te": an even core register (gcc's MVE constraint) */
#define AOT_MVE_DOT4(a0, a1, a2, a3, xv, wp)                                                  \
    do {                                                                                      \
        int8x16_t t_;                                                                         \
        __asm__("vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[r0], %q[x], %q[t]\n\t"            \
                "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[r1], %q[x], %q[t]\n\t"            \
                "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[r2], %q[x], %q[t]\n\t"            \
                "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[r3], %q[x], %q[t]"                   \
                : [r0] "+Te"(a0), [r1] "+Te"(a1), [r2] "+Te"(a2), [r3] "+Te"(a3), [w] "+r"(wp), \
                  [t] "=&w"(t_)                                                               \
                : [x] "w"(xv)                                                                 \
                : "memory");                                                                  \
    } while (0)
#else
#define AOT_MVE_DOT4(a0, a1, a2, a3, xv, wp)          \
    do {                                              \
        a0 = vmladavaq_s8(a0, (xv), vldrbq_s8(wp));      \
        a1 = vmladavaq_s8(a1, (xv), vldrbq_s8(wp + 16)); \
        a2 = vmladavaq_s8(a2, (xv), vldrbq_s8(wp + 32)); \
        a3 = vmladavaq_s8(a3, (xv), vldrbq_s8(wp + 48)); \
        wp += 64;                                     \
    } while (0)
#endif

/* one block of four output channels against the pixel's input held in xv0..xv{K-1}: the
   accumulators start at the block's bias (pb[0..3]), K x 4 VMLADAVA steps over the weights at wp
   (advanced), then the four sums are moved into one vector (two VMOVs) and pb advances to the
   multiplier row. Assembly: one block is 8K + 4 instructions. */
#if defined(__GNUC__) && !defined(__clang__)
#define AOT_MVE_PWDOT(K)                                                                          \
    __asm__ volatile("ldrd %[a2], %[a3], [%[p], #8]\n\tldrd %[a0], %[a1], [%[p]], #16\n\t"                 \
            AOT_MVE_PWSTEP(K) "vmov %q[acc][2], %q[acc][0], %[a0], %[a2]\n\t"                      \
            "vmov %q[acc][3], %q[acc][1], %[a1], %[a3]"                                            \
            : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [w] "+r"(wp),     \
              [p] "+r"(pb), [t] "=&w"(t_), [acc] "=&w"(acc)                                        \
            : [x0] "w"(xv[0]), [x1] "w"(xv[(K) > 1 ? 1 : 0]), [x2] "w"(xv[(K) > 2 ? 2 : 0]),        \
              [x3] "w"(xv[(K) > 3 ? 3 : 0])                                                        \
            : "memory")
#define AOT_MVE_PWONE(X)                                                                          \
    "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[a0], %q[" X "], %q[t]\n\t"                          \
    "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[a1], %q[" X "], %q[t]\n\t"                          \
    "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[a2], %q[" X "], %q[t]\n\t"                          \
    "vldrb.u8 %q[t], [%[w]], #16\n\tvmlava.s8 %[a3], %q[" X "], %q[t]\n\t"
#define AOT_MVE_PWSTEP(K)                                                                         \
    AOT_MVE_PWONE("x0") AOT_MVE_PWSTEP_2_##K
#define AOT_MVE_PWSTEP_2_1
#define AOT_MVE_PWSTEP_2_2 AOT_MVE_PWONE("x1")
#define AOT_MVE_PWSTEP_2_3 AOT_MVE_PWONE("x1") AOT_MVE_PWONE("x2")
#define AOT_MVE_PWSTEP_2_4 AOT_MVE_PWONE("x1") AOT_MVE_PWONE("x2") AOT_MVE_PWONE("x3")
/* requantize acc with the block's multiplier at pb, minus right shift at pb + 32 (pb advances to
   the next block), + zp, clamp to int8, store four bytes at o (advanced): every channel shifts
   right by at least one (no left shift, the fixup's mask not needed) */
#define AOT_MVE_PWRQ()                                                                            \
    __asm__ volatile("vldrw.u32 %q[t], [%[p]], #32\n\tvqrdmulh.s32 %q[acc], %q[acc], %q[t]\n\t"               \
            "vldrw.u32 %q[t], [%[p]], #16\n\tvshr.s32 %q[u], %q[acc], #31\n\t"                       \
            "vqadd.s32 %q[acc], %q[acc], %q[u]\n\tvrshl.s32 %q[acc], %q[acc], %q[t]\n\t"             \
            "vadd.i32 %q[acc], %q[acc], %[zp]\n\tvqshl.s32 %q[acc], %q[acc], #24\n\t"                \
            "vshr.s32 %q[acc], %q[acc], #24\n\tvstrb.32 %q[acc], [%[o]], #4"                          \
            : [acc] "+w"(acc), [p] "+r"(pb), [o] "+l"(o), [t] "=&w"(t_), [u] "=&w"(u_)             \
            : [zp] "r"(zp)                                                                         \
            : "memory")
#endif

/* requantize four lanes (parameters at p, rows ps apart), + zp, clamp */
static inline __attribute__((always_inline)) int32x4_t aot_mve_rq4(int32x4_t acc, const int32_t *p, int32_t ps,
                                                                   int32_t zp, int32_t amin, int32_t amax,
                                                                   int32_t shl) {
    const int32x4_t nright = vldrwq_s32(p + 3 * ps);
    if (shl & 1) { /* some channel shifts left (bit 0 of shl clear: none, known at compile time) */
        acc = vshlq_s32(acc, vldrwq_s32(p + 2 * ps));
    }
    int32x4_t v = vqrdmulhq_s32(acc, vldrwq_s32(p + ps));
    /* the fixup: -1 for negative v where the channel shifts right (bit 1 of shl: every channel does) */
    const int32x4_t fix = vshrq_n_s32((shl & 2) ? v : vandq_s32(v, nright), 31);
    v = vaddq_n_s32(vrshlq_s32(vqaddq_s32(v, fix), nright), zp);
    if (amin == -128 && amax == 127) { /* clamp to int8 without constant registers */
        return vshrq_n_s32(vqshlq_n_s32(v, 24), 24);
    }
    return vminq_s32(vmaxq_s32(v, vdupq_n_s32(amin)), vdupq_n_s32(amax));
}

/* every output channel (OC) of npix pixels (pixel q: input x + q*xs, output out + q*os) for
   short receptive fields (n <= 64): the pixel's input stays in up to four vector registers
   while the channel blocks of four stream their weights (conv4_weights layout) past it */
static inline __attribute__((always_inline)) void aot_mve_pw(
        int8_t *out, const int8_t *x, const int8_t *w, int32_t n, int32_t npix, int32_t xs, int32_t os, int32_t OC,
        const int32_t *p, int32_t ps, int32_t zp, int32_t amin, int32_t amax, int32_t shl) {
    const int32_t chunks = (n + 15) >> 4;
    const int32_t wblock = chunks * 64;
#if defined(__GNUC__) && !defined(__clang__)
    if (shl == 2 && amin == -128 && amax == 127 && ps == 4 && (OC & 3) == 0) { /* the common case in assembly */
        for (int32_t q = 0; q < npix; q++) {
            const int8_t *xp = x + q * xs;
            int8x16_t xv[4];
#pragma GCC unroll 4
            for (int32_t j = 0; j < chunks; j++) {
                xv[j] = (n - 16 * j >= 16) ? vldrbq_s8(xp + 16 * j)
                                           : vldrbq_z_s8(xp + 16 * j, vctp8q((uint32_t)(n - 16 * j)));
            }
#pragma GCC unroll 4
            for (int32_t j = chunks; j < 4; j++) {
                xv[j] = xv[0];
            }
            int8_t *o = out + q * os;
            const int8_t *wp = w;
            const int32_t *pb = p;
            for (int32_t b = 0; b < OC; b += 4) {
                int32_t a0, a1, a2, a3;
                int32x4_t acc, t_, u_;
                switch (chunks) {
                case 1: AOT_MVE_PWDOT(1); break;
                case 2: AOT_MVE_PWDOT(2); break;
                case 3: AOT_MVE_PWDOT(3); break;
                default: AOT_MVE_PWDOT(4); break;
                }
                AOT_MVE_PWRQ();
            }
        }
        return;
    }
#endif
    for (int32_t q = 0; q < npix; q++) {
        const int8_t *xp = x + q * xs;
        int8x16_t xv[4];
#pragma GCC unroll 4
        for (int32_t j = 0; j < chunks; j++) {
            xv[j] = (n - 16 * j >= 16) ? vldrbq_s8(xp + 16 * j) : vldrbq_z_s8(xp + 16 * j, vctp8q((uint32_t)(n - 16 * j)));
        }
        int8_t *o = out + q * os;
        for (int32_t b = 0; b < OC; b += 4) {
            const int8_t *wp = w + (b >> 2) * wblock;
            const int32_t *pb = p + b * ps; /* this block's parameters; the accumulators start at the bias */
            int32_t a0 = pb[0], a1 = pb[1], a2 = pb[2], a3 = pb[3];
#pragma GCC unroll 4
            for (int32_t j = 0; j < chunks; j++) {
                AOT_MVE_DOT4(a0, a1, a2, a3, xv[j], wp);
            }
            int32x4_t acc = vdupq_n_s32(a0);
            acc = vsetq_lane_s32(a1, acc, 1);
            acc = vsetq_lane_s32(a2, acc, 2);
            acc = vsetq_lane_s32(a3, acc, 3);
            int32x4_t v = aot_mve_rq4(acc, pb, ps, zp, amin, amax, shl);
            if ((OC & 3) && OC - b < 4) {
                vstrbq_p_s32(o + b, v, vctp32q((uint32_t)(OC - b)));
            } else {
                vstrbq_s32(o + b, v);
            }
        }
    }
}

/* nc (1..4) output channels of npix pixels (pixel q: input x + q*xs, output out + q*os):
   out[c] = requant(p[c] + sum_k<n x[k] * w'[c][k]); the weights of the block are interleaved
   as [ceil(n/16)][4][16] bytes, zero padded, so one pointer walks them */
static inline __attribute__((always_inline)) void aot_mve_conv4(
        int8_t *out, const int8_t *x, const int8_t *w, int32_t n, int32_t npix, int32_t xs, int32_t os, int32_t nc,
        const int32_t *p, int32_t ps, int32_t zp, int32_t amin, int32_t amax, int32_t shl) {
    const int32_t full = n >> 4;
    const int32_t rest = n & 15;
    const int32x4_t bias = vldrwq_s32(p);
    const mve_pred16_t st = vctp32q((uint32_t)nc);
    for (int32_t q = 0; q < npix; q++) {
        const int8_t *xp = x + q * xs;
        const int8_t *wp = w;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma GCC unroll 4
        for (int32_t j = 0; j < full; j++) {
            int8x16_t xv = vldrbq_s8(xp);
            AOT_MVE_DOT4(a0, a1, a2, a3, xv, wp);
            xp += 16;
        }
        if (rest) {
            int8x16_t xv = vldrbq_z_s8(xp, vctp8q((uint32_t)rest));
            AOT_MVE_DOT4(a0, a1, a2, a3, xv, wp);
        }
        int32x4_t acc = vdupq_n_s32(a0);
        acc = vsetq_lane_s32(a1, acc, 1);
        acc = vsetq_lane_s32(a2, acc, 2);
        acc = vsetq_lane_s32(a3, acc, 3);
        vstrbq_p_s32(out + q * os, aot_mve_rq4(vaddq_s32(acc, bias), p, ps, zp, amin, amax, shl), st);
    }
}

/* acc + the dot product of n int16 activations and n int8 weights: eight lanes per VMLADAVA.S16,
   the weights sign-extended by the load (VLDRB.S16), the tail predicated */
static inline __attribute__((always_inline)) int32_t aot_mve_dot16(const int16_t *x, const int8_t *w, int32_t n,
                                                                   int32_t acc) {
    int32_t k = 0;
#pragma GCC unroll 4
    for (; k + 8 <= n; k += 8) {
        acc = vmladavaq_s16(acc, vldrhq_s16(x + k), vldrbq_s16(w + k));
    }
    if (k < n) {
        const mve_pred16_t p = vctp16q((uint32_t)(n - k));
        acc = vmladavaq_p_s16(acc, vldrhq_z_s16(x + k, p), vldrbq_z_s16(w + k, p), p);
    }
    return acc;
}

/* four output channels of one pixel: out[j] = b[j] + the dot product of n int16 activations and
   the n int8 weights at w + j*ws; each vector of activations loaded once for the four channels */
static inline __attribute__((always_inline)) void aot_mve_dot16x4(int32_t *out, const int16_t *x, const int8_t *w,
                                                                 int32_t n, int32_t ws, const int32_t *b) {
    int32_t a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];
    const int8_t *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
    int32_t k = 0;
#pragma GCC unroll 2
    for (; k + 8 <= n; k += 8) {
        const int16x8_t xv = vldrhq_s16(x + k);
        a0 = vmladavaq_s16(a0, xv, vldrbq_s16(w + k));
        a1 = vmladavaq_s16(a1, xv, vldrbq_s16(w1 + k));
        a2 = vmladavaq_s16(a2, xv, vldrbq_s16(w2 + k));
        a3 = vmladavaq_s16(a3, xv, vldrbq_s16(w3 + k));
    }
    if (k < n) {
        const mve_pred16_t p = vctp16q((uint32_t)(n - k));
        const int16x8_t xv = vldrhq_z_s16(x + k, p);
        a0 = vmladavaq_p_s16(a0, xv, vldrbq_z_s16(w + k, p), p);
        a1 = vmladavaq_p_s16(a1, xv, vldrbq_z_s16(w1 + k, p), p);
        a2 = vmladavaq_p_s16(a2, xv, vldrbq_z_s16(w2 + k, p), p);
        a3 = vmladavaq_p_s16(a3, xv, vldrbq_z_s16(w3 + k, p), p);
    }
    out[0] = a0;
    out[1] = a1;
    out[2] = a2;
    out[3] = a3;
}

/* n bytes from src to dst; n bytes of v at dst (whole vectors unpredicated, then the tail) */
static inline __attribute__((always_inline)) void aot_mve_copy(int8_t *dst, const int8_t *src, int32_t n) {
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vstrbq_s8(dst + i, vldrbq_s8(src + i));
    }
    if (i < n) {
        mve_pred16_t pr = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, pr), pr);
    }
}
static inline __attribute__((always_inline)) void aot_mve_fill(int8_t *dst, int8_t v, int32_t n) {
    const int8x16_t vv = vdupq_n_s8(v);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vstrbq_s8(dst + i, vv);
    }
    if (i < n) {
        vstrbq_p_s8(dst + i, vv, vctp8q((uint32_t)(n - i)));
    }
}

/* depthwise (depth multiplier 1), one output row of OW pixels, every channel: out[ox][c] =
   requant(p'[c] + sum over the window of x[iy][ix][c] * w[ky][kx][c]); taps outside the image
   read zp_in. The kh input rows of the window (iy0 + ky*dh) are first copied into the line
   buffer lb ([kh][LW][C] and 16 bytes, LW = (OW-1)*sw + (kw-1)*dw + 1 columns from ix = -pl), padding
   written as zp_in, so the taps need no bounds checks.
   16 channels per step: VMULLB.S8 / VMULLT.S8 multiply the even and the odd channels into int16
   lanes; two taps are summed there (exact: |x*w| <= 128*127, the schedule refuses weights of
   -128), then widened (VMOVLB / VMOVLT) and added (VQADD: opaque to gcc's reassociation, which
   spills; the sums stay far inside int32) into four int32 accumulators holding the channels
   (0 4 8 12) (2 6 10 14) (1 5 9 13) (3 7 11 15), the order of the parameter table p' (ps = 16);
   four scattered byte stores put them back in order. The weights are laid out per block of 16
   channels as [C/16][kh][kw][16] (zero padded). Always inlined: the schedule passes the shapes
   as constants. */
#define AOT_MVE_LD16(ptr) ((C & 15) ? vldrbq_z_s8((ptr), pr) : vldrbq_s8(ptr))
#define AOT_MVE_DW_WIDEN(e, o)                 \
    do {                                       \
        a0 = vqaddq_s32(a0, vmovlbq_s16(e));    \
        a1 = vqaddq_s32(a1, vmovltq_s16(e));    \
        a2 = vqaddq_s32(a2, vmovlbq_s16(o));    \
        a3 = vqaddq_s32(a3, vmovltq_s16(o));    \
    } while (0)
static inline __attribute__((always_inline)) void aot_mve_dw_row(
        int8_t *out, int8_t *lb, const int8_t *x, const int8_t *w, const int32_t *p, int32_t C, int32_t H,
        int32_t W, int32_t kh, int32_t kw, int32_t dh, int32_t dw, int32_t sw, int32_t iy0, int32_t pl, int32_t OW,
        int32_t zp_in, int32_t ps, int32_t zp, int32_t amin, int32_t amax, int32_t shl) {
    const int32_t LW = (OW - 1) * sw + (kw - 1) * dw + 1;
    const int32_t j0 = pl > 0 ? (pl < LW ? pl : LW) : 0;
    const int32_t j1 = W + pl < LW ? W + pl : LW;
    for (int32_t r = 0; r < kh; r++) {
        const int32_t iy = iy0 + r * dh;
        int8_t *dst = lb + r * LW * C;
        if (iy < 0 || iy >= H || j1 <= j0) {
            aot_mve_fill(dst, (int8_t)zp_in, LW * C);
            continue;
        }
        aot_mve_fill(dst, (int8_t)zp_in, j0 * C);
        aot_mve_copy(dst + j0 * C, x + (iy * W + (j0 - pl)) * C, (j1 - j0) * C);
        aot_mve_fill(dst + j1 * C, (int8_t)zp_in, (LW - j1) * C);
    }
    const uint32x4_t so = vidupq_n_u32(0u, 4);
    const int32_t taps = kh * kw;
    for (int32_t ox = 0; ox < OW; ox++) {
        for (int32_t c = 0; c < C; c += 16) {
            const mve_pred16_t pr = vctp8q((uint32_t)(C - c));
            const int32_t *pb = p + (c >> 4) * 4 * ps; /* this block's parameters */
            int32x4_t a0 = vldrwq_s32(pb), a1 = vldrwq_s32(pb + 4), a2 = vldrwq_s32(pb + 8), a3 = vldrwq_s32(pb + 12);
            const int8_t *xp = lb + ox * sw * C + c;
            const int8_t *wp = w + c * taps;
            __asm__("" : "+r"(xp), "+r"(wp)); /* addresses from two registers, not hoisted (spills) */
#pragma GCC unroll 32
            for (int32_t t = 0; t + 1 < taps; t += 2) {
                const int32_t t1 = t + 1;
                const int8_t *x0p = xp + ((t / kw) * LW + (t % kw) * dw) * C;
                const int8_t *x1p = xp + ((t1 / kw) * LW + (t1 % kw) * dw) * C;
#if defined(__GNUC__) && !defined(__clang__)
                { /* two taps in eight vector registers (gcc spills the accumulators); with C not a
                     multiple of 16 the last block's loads run past the row's channels into the next
                     pixel's (the line buffer holds 16 bytes more; those lanes meet the weights'
                     zero padding and are never stored) */
                    int8x16_t t0_, t1_, t2_, t3_;
                    __asm__ volatile(
                        "vldrb.u8 %q[t0], [%[x0]]\n\tvldrb.u8 %q[t1], [%[w]], #16\n\t"
                        "vmullb.s8 %q[t2], %q[t0], %q[t1]\n\tvmullt.s8 %q[t0], %q[t0], %q[t1]\n\t"
                        "vldrb.u8 %q[t1], [%[x1]]\n\tvldrb.u8 %q[t3], [%[w]], #16\n\t"
                        "vmullb.s8 %q[t1], %q[t1], %q[t3]\n\tvadd.i16 %q[t2], %q[t2], %q[t1]\n\t"
                        "vldrb.u8 %q[t1], [%[x1]]\n\tvmullt.s8 %q[t1], %q[t1], %q[t3]\n\t"
                        "vadd.i16 %q[t0], %q[t0], %q[t1]\n\t"
                        "vmovlb.s16 %q[t1], %q[t2]\n\tvadd.i32 %q[a0], %q[a0], %q[t1]\n\t"
                        "vmovlt.s16 %q[t1], %q[t2]\n\tvadd.i32 %q[a1], %q[a1], %q[t1]\n\t"
                        "vmovlb.s16 %q[t1], %q[t0]\n\tvadd.i32 %q[a2], %q[a2], %q[t1]\n\t"
                        "vmovlt.s16 %q[t1], %q[t0]\n\tvadd.i32 %q[a3], %q[a3], %q[t1]"
                        : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [w] "+r"(wp),
                          [t0] "=&w"(t0_), [t1] "=&w"(t1_), [t2] "=&w"(t2_), [t3] "=&w"(t3_)
                        : [x0] "r"(x0p), [x1] "r"(x1p)
                        : "memory");
                    continue;
                }
#endif
                const int8x16_t x0 = AOT_MVE_LD16(x0p);
                const int8x16_t w0 = AOT_MVE_LD16(wp + t * 16);
                const int8x16_t x1 = AOT_MVE_LD16(x1p);
                const int8x16_t w1 = AOT_MVE_LD16(wp + t1 * 16);
                const int16x8_t e = vaddq_s16(vmullbq_int_s8(x0, w0), vmullbq_int_s8(x1, w1));
                const int16x8_t o = vaddq_s16(vmulltq_int_s8(x0, w0), vmulltq_int_s8(x1, w1));
                AOT_MVE_DW_WIDEN(e, o);
            }
            if (taps & 1) {
                const int32_t t = taps - 1;
                const int8x16_t x0 = AOT_MVE_LD16(xp + ((t / kw) * LW + (t % kw) * dw) * C);
#if defined(__GNUC__) && !defined(__clang__)
                const int8x16_t w0 = AOT_MVE_LD16(wp); /* wp advanced by the pairs */
#else
                const int8x16_t w0 = AOT_MVE_LD16(wp + t * 16);
#endif
                AOT_MVE_DW_WIDEN(vmullbq_int_s8(x0, w0), vmulltq_int_s8(x0, w0));
            }
            int8_t *o = out + ox * C + c;
            a0 = aot_mve_rq4(a0, pb, ps, zp, amin, amax, shl);
            a1 = aot_mve_rq4(a1, pb + 4, ps, zp, amin, amax, shl);
            a2 = aot_mve_rq4(a2, pb + 8, ps, zp, amin, amax, shl);
            a3 = aot_mve_rq4(a3, pb + 12, ps, zp, amin, amax, shl);
            if (C & 15) {
                const uint32_t left = (uint32_t)(C - c);
                vstrbq_scatter_offset_p_s32(o, so, a0, vctp32q((left + 3) >> 2));
                vstrbq_scatter_offset_p_s32(o + 2, so, a1, vctp32q((left + 1) >> 2));
                vstrbq_scatter_offset_p_s32(o + 1, so, a2, vctp32q((left + 2) >> 2));
                vstrbq_scatter_offset_p_s32(o + 3, so, a3, vctp32q(left >> 2));
            } else {
                vstrbq_scatter_offset_s32(o, so, a0);
                vstrbq_scatter_offset_s32(o + 2, so, a1);
                vstrbq_scatter_offset_s32(o + 1, so, a2);
                vstrbq_scatter_offset_s32(o + 3, so, a3);
            }
        }
    }
}
#undef AOT_MVE_DW_WIDEN
#undef AOT_MVE_LD16

/* s += the window's bytes of channels c.. (predicate pr) in the lanes of vload's type */
#define AOT_MVE_WINDOW_SUM(s, vadd, vload)         \
    for (int32_t r = 0; r < rows; r++) {           \
        const int8_t *xp = x + r * rs + c;         \
        for (int32_t j = 0; j < cols; j++) {       \
            s = vadd(s, vload(xp, pr));            \
            xp += C;                               \
        }                                          \
    }
/* per channel sums of a window: out[c] = sum over r < rows, j < cols of x[r*rs + j*C + c]; eight
   channels per step in int16 lanes (VLDRB.S16; exact while rows*cols <= 255), else four in int32;
   the int16 sums are widened by VMOVLB / VMOVLT and stored by two scatters */
static inline __attribute__((always_inline)) void aot_mve_chsum(int32_t *out, const int8_t *x, int32_t C,
                                                                int32_t rows, int32_t cols, int32_t rs) {
    if (rows * cols <= 255) {
        const uint32x4_t so = vidupq_n_u32(0u, 8); /* byte offsets of channels 0 2 4 6 */
        for (int32_t c = 0; c < C; c += 8) {
            const mve_pred16_t pr = vctp16q((uint32_t)(C - c));
            int16x8_t s = vdupq_n_s16(0);
            AOT_MVE_WINDOW_SUM(s, vaddq_s16, vldrbq_z_s16);
            const uint32_t left = (uint32_t)(C - c);
            vstrwq_scatter_offset_p_s32(out + c, so, vmovlbq_s16(s), vctp32q((left + 1) >> 1));
            vstrwq_scatter_offset_p_s32(out + c + 1, so, vmovltq_s16(s), vctp32q(left >> 1));
        }
        return;
    }
    for (int32_t c = 0; c < C; c += 4) {
        const mve_pred16_t pr = vctp32q((uint32_t)(C - c));
        int32x4_t s = vdupq_n_s32(0);
        AOT_MVE_WINDOW_SUM(s, vaddq_s32, vldrbq_z_s32);
        vstrwq_p_s32(out + c, s, pr);
    }
}
#undef AOT_MVE_WINDOW_SUM

#define AOT_MVE_COL_FILL(d, v, len) aot_mve_fill((d), (int8_t)(v), (len))
#define AOT_MVE_COL_COPY(d, s_, len) aot_mve_copy((d), (s_), (len))
/* a whole row of the window: short constant runs by word loads and stores (gcc's memcpy) */
#define AOT_MVE_COL_RUN(d, s_, len)                                    \
    do {                                                               \
        if (__builtin_constant_p(len) && (len) <= 16) {                \
            __builtin_memcpy((d), (s_), (size_t)(len));                \
        } else {                                                       \
            aot_mve_copy((d), (s_), (len));                            \
        }                                                              \
    } while (0)
#define AOT_MVE_COL_INLINE __attribute__((always_inline))

#else /* portable C: the same arithmetic, lane by lane */

static inline int32_t aot_mve_rq1(int32_t acc, const int32_t *p, int32_t ps, int32_t zp, int32_t amin,
                                  int32_t amax) {
    int32_t m = p[ps], left = p[2 * ps], nright = p[3 * ps];
    int32_t v = (int32_t)((uint32_t)acc << left);
    int64_t ab = (int64_t)v * (int64_t)m;
    v = (v == m && v == INT32_MIN) ? INT32_MAX : (int32_t)((ab + (INT64_C(1) << 30)) >> 31);
    int32_t e = -nright;
    int32_t mask = (int32_t)((UINT32_C(1) << e) - 1u);
    int32_t threshold = (mask >> 1) + (v < 0 ? 1 : 0);
    v = (v >> e) + ((v & mask) > threshold ? 1 : 0);
    v += zp;
    return v < amin ? amin : (v > amax ? amax : v);
}

/* acc + the dot product of n int16 activations and n int8 weights (aot.kernel.intrinsics_mve.mve_dot16) */
static inline int32_t aot_mve_dot16(const int16_t *x, const int8_t *w, int32_t n, int32_t acc) {
    uint32_t a = (uint32_t)acc;
    for (int32_t k = 0; k < n; k++) {
        a += (uint32_t)((int32_t)x[k] * (int32_t)w[k]);
    }
    return (int32_t)a;
}

/* aot.kernel.intrinsics_mve.mve_dot16x4 */
static inline void aot_mve_dot16x4(int32_t *out, const int16_t *x, const int8_t *w, int32_t n, int32_t ws,
                                   const int32_t *b) {
    for (int32_t j = 0; j < 4; j++) {
        out[j] = aot_mve_dot16(x, w + j * ws, n, b[j]);
    }
}

static inline void aot_mve_conv4(int8_t *out, const int8_t *x, const int8_t *w, int32_t n, int32_t npix, int32_t xs,
                                 int32_t os, int32_t nc, const int32_t *p, int32_t ps, int32_t zp, int32_t amin,
                                 int32_t amax, int32_t shl) {
    (void)shl;
    for (int32_t q = 0; q < npix; q++) {
        for (int32_t c = 0; c < nc; c++) {
            int32_t acc = p[c];
            for (int32_t k = 0; k < n; k++) {
                acc += (int32_t)x[q * xs + k] * (int32_t)w[(k >> 4) * 64 + c * 16 + (k & 15)];
            }
            out[q * os + c] = (int8_t)aot_mve_rq1(acc, p + c, ps, zp, amin, amax);
        }
    }
}

static inline void aot_mve_pw(int8_t *out, const int8_t *x, const int8_t *w, int32_t n, int32_t npix, int32_t xs,
                              int32_t os, int32_t OC, const int32_t *p, int32_t ps, int32_t zp, int32_t amin,
                              int32_t amax, int32_t shl) {
    const int32_t wblock = ((n + 15) >> 4) * 64;
    for (int32_t b = 0; b < OC; b += 4) {
        aot_mve_conv4(out + b, x, w + (b >> 2) * wblock, n, npix, xs, os, OC - b < 4 ? OC - b : 4, p + b * ps, ps, zp,
                      amin, amax, shl);
    }
}

static inline void aot_mve_dw_row(int8_t *out, int8_t *lb, const int8_t *x, const int8_t *w, const int32_t *p,
                                  int32_t C, int32_t H, int32_t W, int32_t kh, int32_t kw, int32_t dh, int32_t dw,
                                  int32_t sw, int32_t iy0, int32_t pl, int32_t OW, int32_t zp_in, int32_t ps,
                                  int32_t zp, int32_t amin, int32_t amax, int32_t shl) {
    (void)lb;
    (void)shl;
    for (int32_t ox = 0; ox < OW; ox++) {
        int32_t ix0 = ox * sw - pl;
        for (int32_t c = 0; c < C; c++) {
            int32_t r = c & 15;
            const int32_t *pc = p + (c >> 4) * 4 * ps + ((r & 1) * 2 + ((r >> 1) & 1)) * 4 + (r >> 2);
            int32_t acc = pc[0];
            for (int32_t ky = 0; ky < kh; ky++) {
                int32_t iy = iy0 + ky * dh;
                for (int32_t kx = 0; kx < kw; kx++) {
                    int32_t ix = ix0 + kx * dw;
                    int32_t xv = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? (int32_t)x[(iy * W + ix) * C + c] : zp_in;
                    acc += xv * (int32_t)w[(c - r) * kh * kw + (ky * kw + kx) * 16 + r];
                }
            }
            out[ox * C + c] = (int8_t)aot_mve_rq1(acc, pc, ps, zp, amin, amax);
        }
    }
}

static inline void aot_mve_chsum(int32_t *out, const int8_t *x, int32_t C, int32_t rows, int32_t cols, int32_t rs) {
    for (int32_t c = 0; c < C; c++) {
        int32_t acc = 0;
        for (int32_t r = 0; r < rows; r++) {
            for (int32_t j = 0; j < cols; j++) {
                acc += (int32_t)x[r * rs + j * C + c];
            }
        }
        out[c] = acc;
    }
}

#if defined(__riscv_vector) /* RISC-V V: vector copies (aot_rvv.h) */
#define AOT_MVE_COL_FILL(d, v, len) aot_rvv_fill((d), (v), (len))
#define AOT_MVE_COL_COPY(d, s_, len) aot_rvv_copy((d), (s_), (len))
#else
#define AOT_MVE_COL_FILL(d, v, len)            \
    for (int32_t i_ = 0; i_ < (len); i_++) {   \
        (d)[i_] = (int8_t)(v);                 \
    }
#define AOT_MVE_COL_COPY(d, s_, len)           \
    for (int32_t i_ = 0; i_ < (len); i_++) {   \
        (d)[i_] = (s_)[i_];                    \
    }
#endif
#define AOT_MVE_COL_RUN(d, s_, len) AOT_MVE_COL_COPY(d, s_, len)
#define AOT_MVE_COL_INLINE

#endif /* __ARM_FEATURE_MVE */

/* the receptive fields of count output pixels from flat pixel q0, side by side (kh*kw*C bytes
   each, no dilation): per window row one run of in-bounds bytes copied, the rest zp (by vector
   stores with MVE, byte by byte in portable C: AOT_MVE_COL_FILL / COPY / RUN above) */
static inline AOT_MVE_COL_INLINE void aot_mve_col(int8_t *col, const int8_t *x, int32_t H, int32_t W,
                                                  int32_t C, int32_t kh, int32_t kw, int32_t sh, int32_t sw,
                                                  int32_t pt, int32_t pl, int32_t OH, int32_t OW, int32_t q0,
                                                  int32_t count, int32_t zp) {
    const int32_t run = kw * C;
    int32_t n = q0 / (OH * OW);
    int32_t oy = (q0 - n * OH * OW) / OW;
    int32_t ox = q0 - n * OH * OW - oy * OW;
    int8_t *dst = col;
    for (int32_t s = 0; s < count; s++) {
        const int32_t ix0 = ox * sw - pl;
        const int32_t j0 = ix0 < 0 ? (-ix0 < kw ? -ix0 : kw) : 0;
        const int32_t j1 = W - ix0 < kw ? (W - ix0 > j0 ? W - ix0 : j0) : kw;
        const int32_t iy0 = oy * sh - pt;
        const int32_t ky0 = iy0 < 0 ? (-iy0 < kh ? -iy0 : kh) : 0; /* rows ky0..ky1 inside the image */
        const int32_t ky1 = H - iy0 < kh ? (H - iy0 > ky0 ? H - iy0 : ky0) : kh;
        AOT_MVE_COL_FILL(dst, zp, ky0 * run);
        if (j0 == 0 && j1 == kw) { /* whole rows: one copy of run bytes each */
            const int8_t *src = x + ((n * H + iy0 + ky0) * W + ix0) * C;
            for (int32_t ky = ky0; ky < ky1; ky++) {
                AOT_MVE_COL_RUN(dst + ky * run, src, run);
                src += W * C;
            }
        } else {
            for (int32_t ky = ky0; ky < ky1; ky++) {
                int8_t *d = dst + ky * run;
                AOT_MVE_COL_FILL(d, zp, j0 * C);
                AOT_MVE_COL_COPY(d + j0 * C, x + ((n * H + iy0 + ky) * W + ix0 + j0) * C, (j1 - j0) * C);
                AOT_MVE_COL_FILL(d + j1 * C, zp, (kw - j1) * C);
            }
        }
        AOT_MVE_COL_FILL(dst + ky1 * run, zp, (kh - ky1) * run);
        dst += kh * run;
        if (++ox == OW) {
            ox = 0;
            if (++oy == OH) {
                oy = 0;
                n++;
            }
        }
    }
}
#undef AOT_MVE_COL_FILL
#undef AOT_MVE_COL_COPY
#undef AOT_MVE_COL_RUN
#undef AOT_MVE_COL_INLINE

/* out[i] = t[out[i] + 128] for i < n, in place (aot.kernel.intrinsics_mve.mve_lut): 16 bytes per
   step, the table read by one VLDRB gather with byte offsets (out[i] ^ 0x80 = out[i] + 128) */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
static inline __attribute__((always_inline)) void aot_mve_lut(int8_t *out, const int8_t *t, int32_t n) {
    uint8_t *o = (uint8_t *)out;
    const uint8_t *tb = (const uint8_t *)t;
    const uint8x16_t bias = vdupq_n_u8(0x80u);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vstrbq_u8(o + i, vldrbq_gather_offset_u8(tb, veorq_u8(vldrbq_u8(o + i), bias)));
    }
    if (i < n) {
        const mve_pred16_t pr = vctp8q((uint32_t)(n - i));
        vstrbq_p_u8(o + i, vldrbq_gather_offset_z_u8(tb, veorq_u8(vldrbq_z_u8(o + i, pr), bias), pr), pr);
    }
}
#else
static inline void aot_mve_lut(int8_t *out, const int8_t *t, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        out[i] = t[(int32_t)out[i] + 128];
    }
}
#endif

#endif /* AOT_HELIUM_H */
