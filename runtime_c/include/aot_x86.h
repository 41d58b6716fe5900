/*
 * microaot x86-64 host routines: the vector intrinsics of aot/kernel/intrinsics_x86.py (their
 * specification), called by the host schedules (aot/lower/schedule/host_x86.py). Portable C with
 * the same arithmetic: weights packed [block of 16 channels][ceil(n/4)][16][4], the parameter
 * table [block][5][16] (bias, multiplier, left shift, -right shift, 128 * sum w). The LLVM
 * backend's twins use AVX-512 VNNI (aot/llvm/x86.py).
 */
#ifndef AOT_X86_H
#define AOT_X86_H

#include <stdint.h>

static inline int32_t aot_x86_gemm(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                   int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                   int32_t amax) {
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
                const int32_t xv = xq[k];
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

static inline int32_t aot_x86_gemm_vnni(int8_t *out, const int8_t *x, const int8_t *w, const int32_t *p, int32_t n,
                                        int32_t npix, int32_t xs, int32_t os, int32_t OC, int32_t zp, int32_t amin,
                                        int32_t amax) {
    return aot_x86_gemm(out, x, w, p, n, npix, xs, os, OC, zp, amin, amax);
}

#endif /* AOT_X86_H */
