/*
 * microaot x86-64 host routines: the vector intrinsics of aot/kernel/intrinsics_x86.py (their
 * specification), called by the host schedules (aot/lower/schedule/host_x86.py). Portable C with
 * the same arithmetic: weights packed [block of 16 channels][ceil(n/4)][16][4], the parameter
 * table [block][5][16] (bias, multiplier, left shift, -right shift, 128 * sum w). The LLVM
 * backend's twins use AVX-512 VNNI (aot/llvm/x86.py). float32: aot_x86_sgemm16/8 (weights
 * [block of L][n][L]) and aot_x86_sdw16/8 (depthwise, weights [kh*kw][C padded to L]), each
 * output summed in TFLM's order with one rounding per multiply and per add (ISO C: no
 * contraction into fused multiply-adds).
 *
 * The last argument of every routine, nt, is a number of threads: with nt > 1 and enough work
 * the outputs are split (pixels, channel blocks or output rows) across the host thread pool,
 * aot_parallel_for (platform/host/aot_threads.c, host builds only); the same results bit for bit.
 */
#ifndef AOT_X86_H
#define AOT_X86_H

#include <stdint.h>

typedef void (*aot_task_fn)(void *ctx, int32_t lo, int32_t hi);
int32_t aot_parallel_for(aot_task_fn fn, void *ctx, int32_t n, int32_t threads);

/* below this many multiply-adds a routine runs on the calling thread alone */
#define AOT_X86_MIN_PARALLEL_MACS 262144

/* split pixels while every thread gets a tile of 4; else channel blocks */
static inline int32_t aot_x86_by_blocks(int32_t npix, int32_t nt) { return npix < 4 * nt; }

static inline int32_t aot_x86_gemm_core(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                        int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                        int32_t amax, int32_t rl, int32_t rs, int32_t xu) {
    if (rl == 0) rl = n;
    const int32_t steps = (n + 3) >> 2;
    const int32_t nb = (OC + 15) >> 4;
    for (int32_t q = 0; q < npix; ++q) {
        const int8_t *xq = x + q * xs;
        for (int32_t ob = 0; ob < nb; ++ob) {
            const int32_t *pb = p + ob * 80;
            const int8_t *wb = w + ob * steps * 64;
            int32_t acc[16];
            for (int32_t l = 0; l < 16; ++l) acc[l] = pb[l];
            for (int32_t k = 0; k < n; ++k) {
                const int32_t xb = xq[(k / rl) * rs + k % rl];
                const int32_t xv = xu ? (xb < 0 ? xb + 128 : xb - 128) : xb; /* stored x xor 0x80 */
                const int8_t *wk = wb + (k >> 2) * 64 + (k & 3);
                for (int32_t l = 0; l < 16; ++l) acc[l] = (int32_t)((uint32_t)acc[l] + (uint32_t)(xv * wk[4 * l]));
            }
            const int32_t left = OC - ob * 16 < 16 ? OC - ob * 16 : 16;
            for (int32_t l = 0; l < left; ++l) {
                const int32_t sh = pb[32 + l] > 0 ? pb[32 + l] : pb[48 + l];
                int32_t v = aot_requantize(acc[l], pb[16 + l], sh) + zp;
                v = v < amin ? amin : v;
                v = v > amax ? amax : v;
                out[q * os + ob * 16 + l] = (int8_t)v;
            }
        }
    }
    return 0;
}

typedef struct {
    int8_t *out;
    const int8_t *x, *w;
    const int32_t *p;
    int32_t n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu, by_blocks;
} aot_x86_gemm_job;

static inline void aot_x86_gemm_task(void *ctx, int32_t lo, int32_t hi) {
    const aot_x86_gemm_job *j = (const aot_x86_gemm_job *)ctx;
    if (j->by_blocks) {
        const int32_t end = hi * 16 < j->OC ? hi * 16 : j->OC;
        aot_x86_gemm_core(j->out + lo * 16, j->x, j->w + lo * ((j->n + 3) >> 2) * 64, j->p + lo * 80, j->n, j->npix,
                          j->xs, j->os, end - lo * 16, j->zp, j->amin, j->amax, j->rl, j->rs, j->xu);
    } else {
        aot_x86_gemm_core(j->out + lo * j->os, j->x + lo * j->xs, j->w, j->p, j->n, hi - lo, j->xs, j->os, j->OC,
                          j->zp, j->amin, j->amax, j->rl, j->rs, j->xu);
    }
}

static inline int32_t aot_x86_gemm(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                   int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                   int32_t amax, int32_t rl, int32_t rs, int32_t xu, int32_t nt) {
    if (nt > 1 && (int64_t)n * npix * OC >= AOT_X86_MIN_PARALLEL_MACS) {
        aot_x86_gemm_job j = {out, x, w, p, n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu,
                              aot_x86_by_blocks(npix, nt)};
        return aot_parallel_for(aot_x86_gemm_task, &j, j.by_blocks ? (OC + 15) >> 4 : npix, nt);
    }
    return aot_x86_gemm_core(out, x, w, p, n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu);
}

static inline int32_t aot_x86_gemm_vnni(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                        int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                        int32_t amax, int32_t rl, int32_t rs, int32_t xu, int32_t nt) {
    return aot_x86_gemm(out, x, w, p, n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu, nt);
}

/* int8 depthwise convolution, depth multiplier 1, one image (NHWC): weights packed
 * [kh][ceil(kw/4)][ceil(C/16)][16][4], the table as for aot_x86_gemm (bias with the input offset
 * folded in); taps outside the image read the input zero point zpi. t (the LLVM twin's scratch)
 * and nt are not used here. */
static inline int32_t aot_x86_dw_vnni(int8_t *out, const int8_t *x, int8_t *t, const int8_t *w, const int32_t *p,
                                      int32_t H, int32_t W, int32_t C, int32_t kh, int32_t kw, int32_t sh,
                                      int32_t sw, int32_t dh, int32_t dw, int32_t pt, int32_t pl, int32_t OH,
                                      int32_t OW, int32_t zpi, int32_t zp, int32_t amin, int32_t amax, int32_t nt) {
    const int32_t groups = (kw + 3) >> 2, nb = (C + 15) >> 4;
    (void)t;
    (void)nt;
    for (int32_t oy = 0; oy < OH; ++oy) {
        for (int32_t ox = 0; ox < OW; ++ox) {
            for (int32_t c = 0; c < C; ++c) {
                const int32_t *pb = p + (c >> 4) * 80 + (c & 15);
                int32_t acc = pb[0];
                for (int32_t ky = 0; ky < kh; ++ky) {
                    const int32_t iy = oy * sh - pt + ky * dh;
                    for (int32_t kx = 0; kx < kw; ++kx) {
                        const int32_t ix = ox * sw - pl + kx * dw;
                        const int32_t xv = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(iy * W + ix) * C + c] : zpi;
                        const int8_t wv = w[((ky * groups + (kx >> 2)) * nb + (c >> 4)) * 64 + (c & 15) * 4 + (kx & 3)];
                        acc = (int32_t)((uint32_t)acc + (uint32_t)(xv * wv));
                    }
                }
                const int32_t shift = pb[32] > 0 ? pb[32] : pb[48];
                int32_t v = aot_requantize(acc, pb[16], shift) + zp;
                v = v < amin ? amin : v;
                v = v > amax ? amax : v;
                out[(oy * OW + ox) * C + c] = (int8_t)v;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ float32 */
static inline float aot_x86_act_f32(float v, int32_t act, float lo, float hi) {
    if (act & 1) v = v < lo ? lo : v; /* std::max(v, lo): NaN and -0.0 pass, as TFLM */
    if (act & 2) v = hi < v ? hi : v; /* std::min(v, hi) */
    return v;
}

static inline void aot_x86_sgemm_core(int32_t L, float *out, const float *x, const float *w, const float *b, int32_t n,
                                      int32_t rl, int32_t rs, int32_t npix, int32_t xs, int32_t os, int32_t OC,
                                      int32_t act, float lo, float hi) {
    const int32_t nb = (OC + L - 1) / L;
    for (int32_t q = 0; q < npix; ++q) {
        const float *xq = x + q * xs;
        for (int32_t ob = 0; ob < nb; ++ob) {
            const float *wb = w + ob * n * L;
            float acc[16];
            for (int32_t l = 0; l < L; ++l) acc[l] = 0.0f;
            for (int32_t k = 0; k < n; ++k) {
                const float xv = xq[(k / rl) * rs + k % rl];
                for (int32_t l = 0; l < L; ++l) acc[l] = acc[l] + xv * wb[k * L + l];
            }
            const int32_t left = OC - ob * L < L ? OC - ob * L : L;
            for (int32_t l = 0; l < left; ++l) out[q * os + ob * L + l] = aot_x86_act_f32(acc[l] + b[ob * L + l], act, lo, hi);
        }
    }
}

typedef struct {
    float *out;
    const float *x, *w, *b;
    int32_t L, n, rl, rs, npix, xs, os, OC, act, by_blocks;
    float lo, hi;
} aot_x86_sgemm_job;

static inline void aot_x86_sgemm_task(void *ctx, int32_t lo, int32_t hi) {
    const aot_x86_sgemm_job *j = (const aot_x86_sgemm_job *)ctx;
    const int32_t L = j->L;
    if (j->by_blocks) {
        const int32_t end = hi * L < j->OC ? hi * L : j->OC;
        aot_x86_sgemm_core(L, j->out + lo * L, j->x, j->w + lo * j->n * L, j->b + lo * L, j->n, j->rl, j->rs, j->npix,
                           j->xs, j->os, end - lo * L, j->act, j->lo, j->hi);
    } else {
        aot_x86_sgemm_core(L, j->out + lo * j->os, j->x + lo * j->xs, j->w, j->b, j->n, j->rl, j->rs, hi - lo, j->xs,
                           j->os, j->OC, j->act, j->lo, j->hi);
    }
}

static inline int32_t aot_x86_sgemm(int32_t L, float *out, const float *x, const float *w, const float *b, int32_t n,
                                    int32_t rl, int32_t rs, int32_t npix, int32_t xs, int32_t os, int32_t OC,
                                    int32_t act, float lo, float hi, int32_t nt) {
    if (nt > 1 && (int64_t)n * npix * OC >= AOT_X86_MIN_PARALLEL_MACS) {
        aot_x86_sgemm_job j = {out, x, w, b, L, n, rl, rs, npix, xs, os, OC, act, aot_x86_by_blocks(npix, nt), lo, hi};
        return aot_parallel_for(aot_x86_sgemm_task, &j, j.by_blocks ? (OC + L - 1) / L : npix, nt);
    }
    aot_x86_sgemm_core(L, out, x, w, b, n, rl, rs, npix, xs, os, OC, act, lo, hi);
    return 0;
}

static inline int32_t aot_x86_sgemm16(float *out, const float *x, const float *w, const float *b, int32_t n,
                                      int32_t rl, int32_t rs, int32_t npix, int32_t xs, int32_t os, int32_t OC,
                                      int32_t act, float lo, float hi, int32_t nt) {
    return aot_x86_sgemm(16, out, x, w, b, n, rl, rs, npix, xs, os, OC, act, lo, hi, nt);
}

static inline int32_t aot_x86_sgemm8(float *out, const float *x, const float *w, const float *b, int32_t n,
                                     int32_t rl, int32_t rs, int32_t npix, int32_t xs, int32_t os, int32_t OC,
                                     int32_t act, float lo, float hi, int32_t nt) {
    return aot_x86_sgemm(8, out, x, w, b, n, rl, rs, npix, xs, os, OC, act, lo, hi, nt);
}

typedef struct {
    float *out;
    const float *x, *w, *b;
    int32_t L, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OW, act;
    float lo, hi;
} aot_x86_sdw_job;

/* output rows oy0..oy1-1 of a depthwise convolution (depth multiplier 1) */
static inline void aot_x86_sdw_rows(void *ctx, int32_t oy0, int32_t oy1) {
    const aot_x86_sdw_job *j = (const aot_x86_sdw_job *)ctx;
    const int32_t L = j->L, C = j->C, cp = (C + L - 1) / L * L;
    for (int32_t oy = oy0; oy < oy1; ++oy) {
        for (int32_t ox = 0; ox < j->OW; ++ox) {
            for (int32_t c0 = 0; c0 < C; c0 += L) {
                const int32_t m = C - c0 < L ? C - c0 : L;
                float acc[16];
                for (int32_t l = 0; l < L; ++l) acc[l] = 0.0f;
                for (int32_t ky = 0; ky < j->kh; ++ky) {
                    const int32_t iy = oy * j->sh - j->pt + ky * j->dh;
                    if (iy < 0 || iy >= j->H) continue;
                    for (int32_t kx = 0; kx < j->kw; ++kx) {
                        const int32_t ix = ox * j->sw - j->pl + kx * j->dw;
                        if (ix < 0 || ix >= j->W) continue;
                        const float *xr = j->x + (iy * j->W + ix) * C + c0;
                        const float *wr = j->w + (ky * j->kw + kx) * cp + c0;
                        for (int32_t l = 0; l < m; ++l) acc[l] = acc[l] + xr[l] * wr[l];
                    }
                }
                float *o = j->out + (oy * j->OW + ox) * C + c0;
                for (int32_t l = 0; l < m; ++l) o[l] = aot_x86_act_f32(acc[l] + j->b[c0 + l], j->act, j->lo, j->hi);
            }
        }
    }
}

static inline int32_t aot_x86_sdw(int32_t L, float *out, const float *x, const float *w, const float *b, int32_t H,
                                  int32_t W, int32_t C, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh,
                                  int32_t dw, int32_t pt, int32_t pl, int32_t OH, int32_t OW, int32_t act, float lo,
                                  float hi, int32_t nt) {
    aot_x86_sdw_job j = {out, x, w, b, L, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OW, act, lo, hi};
    if (nt > 1 && (int64_t)OH * OW * C * kh * kw >= AOT_X86_MIN_PARALLEL_MACS) return aot_parallel_for(aot_x86_sdw_rows, &j, OH, nt);
    aot_x86_sdw_rows(&j, 0, OH);
    return 0;
}

static inline int32_t aot_x86_sdw16(float *out, const float *x, const float *w, const float *b, int32_t H, int32_t W,
                                    int32_t C, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw,
                                    int32_t pt, int32_t pl, int32_t OH, int32_t OW, int32_t act, float lo, float hi,
                                    int32_t nt) {
    return aot_x86_sdw(16, out, x, w, b, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OH, OW, act, lo, hi, nt);
}

static inline int32_t aot_x86_sdw8(float *out, const float *x, const float *w, const float *b, int32_t H, int32_t W,
                                   int32_t C, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw,
                                   int32_t pt, int32_t pl, int32_t OH, int32_t OW, int32_t act, float lo, float hi,
                                   int32_t nt) {
    return aot_x86_sdw(8, out, x, w, b, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OH, OW, act, lo, hi, nt);
}

#endif /* AOT_X86_H */
