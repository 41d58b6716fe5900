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

/* requantize four lanes (parameters at p, rows ps apart), + zp, clamp */
static inline __attribute__((always_inline)) int32x4_t aot_mve_rq4(int32x4_t acc, const int32_t *p, int32_t ps,
                                                                   int32_t zp, int32_t amin, int32_t amax,
                                                                   int32_t shl) {
    const int32x4_t nright = vldrwq_s32(p + 3 * ps);
    if (shl) { /* some channel shifts left (shl 0: none, known at compile time) */
        acc = vshlq_s32(acc, vldrwq_s32(p + 2 * ps));
    }
    int32x4_t v = vqrdmulhq_s32(acc, vldrwq_s32(p + ps));
    v = vaddq_n_s32(vrshlq_s32(vqaddq_s32(v, vshrq_n_s32(vandq_s32(v, nright), 31)), nright), zp);
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

/* eight int8 lanes widened to int16; predicated only when the channel count is not a multiple of 8 */
#define AOT_MVE_LD8(ptr) ((C & 7) ? vldrbq_z_s16((ptr), pr) : vldrbq_s16(ptr))
#define AOT_MVE_DW_TAP(xv, wv)                    \
    do {                                          \
        int16x8_t wv_ = (wv);                     \
        int16x8_t xv_ = (xv);                     \
        ae = vqaddq_s32(ae, vmullbq_int_s16(xv_, wv_)); \
        ao = vqaddq_s32(ao, vmulltq_int_s16(xv_, wv_)); \
    } while (0)

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
   buffer lb ([kh][LW][C], LW = (OW-1)*sw + (kw-1)*dw + 1 columns from ix = -pl), padding
   written as zp_in, so the taps need no bounds checks.
   Eight channels per step: VLDRB.S16 widens them, VMULLB / VMULLT multiply the even and the
   odd channels into two int32 accumulators (VQADD: an opaque add gcc does not reassociate into
   spills; the sums stay far inside int32, where it equals TFLite's wrapping add); the parameter
   table p' is ordered per block of eight as (c0 c2 c4 c6 c1 c3 c5 c7), and the results are
   scattered back in order. The weights are laid out per block of eight channels as
   [C/8][kh][kw][8] (zero padded). Always inlined: the schedule passes the shapes as constants. */
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
    const uint32x4_t so = vidupq_n_u32(0u, 2);
    for (int32_t ox = 0; ox < OW; ox++) {
        for (int32_t c = 0; c < C; c += 8) {
            const mve_pred16_t pr = vctp16q((uint32_t)(C - c));
            const int32_t *pb = p + (c >> 3) * 4 * ps; /* this block's parameters */
            int32x4_t ae = vldrwq_s32(pb);
            int32x4_t ao = vldrwq_s32(pb + 4);
            const int8_t *xp = lb + ox * sw * C + c;
            const int8_t *wp = w + c * kh * kw;
            __asm__("" : "+r"(xp), "+r"(wp)); /* addresses from two registers, not hoisted (spills) */
#pragma GCC unroll 16
            for (int32_t ky = 0; ky < kh; ky++) {
#pragma GCC unroll 16
                for (int32_t kx = 0; kx < kw; kx++) {
                    AOT_MVE_DW_TAP(AOT_MVE_LD8(xp + (ky * LW + kx * dw) * C), AOT_MVE_LD8(wp + (ky * kw + kx) * 8));
                }
            }
            int8_t *o = out + ox * C + c;
            int32x4_t re = aot_mve_rq4(ae, pb, ps, zp, amin, amax, shl);
            int32x4_t ro = aot_mve_rq4(ao, pb + 4, ps, zp, amin, amax, shl);
            if (C & 7) {
                const int32_t left = C - c;
                vstrbq_scatter_offset_p_s32(o, so, re, vctp32q((uint32_t)((left + 1) >> 1)));
                vstrbq_scatter_offset_p_s32(o + 1, so, ro, vctp32q((uint32_t)(left >> 1)));
            } else {
                vstrbq_scatter_offset_s32(o, so, re);
                vstrbq_scatter_offset_s32(o + 1, so, ro);
            }
        }
    }
}
#undef AOT_MVE_DW_TAP

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
            int32_t r = c & 7;
            const int32_t *pc = p + (c >> 3) * 4 * ps + (r & 1) * 4 + (r >> 1);
            int32_t acc = pc[0];
            for (int32_t ky = 0; ky < kh; ky++) {
                int32_t iy = iy0 + ky * dh;
                for (int32_t kx = 0; kx < kw; kx++) {
                    int32_t ix = ix0 + kx * dw;
                    int32_t xv = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? (int32_t)x[(iy * W + ix) * C + c] : zp_in;
                    acc += xv * (int32_t)w[(c - r) * kh * kw + (ky * kw + kx) * 8 + r];
                }
            }
            out[ox * C + c] = (int8_t)aot_mve_rq1(acc, pc, ps, zp, amin, amax);
        }
    }
}

#endif /* __ARM_FEATURE_MVE */

#endif /* AOT_HELIUM_H */
