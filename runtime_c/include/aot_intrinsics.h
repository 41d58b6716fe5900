/*
 * microaot scalar intrinsics: the functions generated C kernels call (aot_srdhm, aot_requantize,
 * aot_smlad, ...), one definition shared by every model library (each library's
 * <prefix>_internal.h includes this header).
 *
 * aot/kernel/intrinsics.py is their specification; the LLVM backend (aot/llvm/intrinsics.py)
 * implements the same ones. Integer rounding follows TensorFlow Lite Micro's reference kernels.
 * The packed 16-bit helpers use the ARMv7E-M DSP instructions where the core has them
 * (__ARM_FEATURE_DSP) and exact portable C elsewhere.
 *
 * C99, static inline only: a translation unit pays only for what it calls.
 */
#ifndef AOT_INTRINSICS_H
#define AOT_INTRINSICS_H

#include <math.h>
#include <stdint.h>

#include "aot_runtime.h"

/* float infinity as the C printer spells it */
#define AOT_F32_INF INFINITY

static inline int32_t aot_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t aot_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int64_t aot_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t aot_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
/* float: the second operand when either is NaN or both are equal (TFLM's MINIMUM / MAXIMUM, x86
   minps / maxps); TFLM's std::max(v, lo) is aot_max_f32(lo, v): NaN and -0.0 pass through */
static inline float aot_min_f32(float a, float b) { return a < b ? a : b; }
static inline float aot_max_f32(float a, float b) { return a > b ? a : b; }

/* SaturatingRoundingDoublingHighMul */
static inline int32_t aot_srdhm(int32_t a, int32_t b) {
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    /* (ab + nudge) / 2^31 truncated, with TFLite's sign-dependent nudge, equals
       floor((ab + 2^30) / 2^31): one multiply-accumulate and an arithmetic shift */
    int64_t ab = (int64_t)a * (int64_t)b;
    return (int32_t)((ab + (INT64_C(1) << 30)) >> 31);
}

/* RoundingDivideByPOT: x / 2^exponent, rounded half away from zero */
static inline int32_t aot_rdbpot(int32_t x, int32_t exponent) {
    int32_t mask = (int32_t)((UINT32_C(1) << exponent) - 1u);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier (two roundings, as TFLite Micro's reference) */
static inline int32_t aot_requantize(int32_t x, int32_t multiplier, int32_t shift) {
    int32_t left = shift > 0 ? shift : 0;
    int32_t right = shift > 0 ? 0 : -shift;
    return aot_rdbpot(aot_srdhm((int32_t)((uint32_t)x << left), multiplier), right);
}

/* MultiplyByQuantizedMultiplier of an int64 accumulator (TFLite Micro's 16x8 kernels): the
   multiplier reduced to 16 bits, one rounding, the result wrapped to int32 (shift -31..7) */
static inline int32_t aot_requantize64(int64_t x, int32_t multiplier, int32_t shift) {
    int64_t reduced = multiplier < 0x7FFF0000 ? (int64_t)((multiplier + (1 << 15)) >> 16) : 0x7FFF;
    int32_t total = 15 - shift;
    uint64_t r = (uint64_t)x * (uint64_t)reduced + (UINT64_C(1) << (total - 1));
    return (int32_t)(uint32_t)(uint64_t)((int64_t)r >> total);
}

/* count leading zeros of x as uint32 (32 for 0) */
static inline int32_t aot_clz32(int32_t x) {
    return x == 0 ? 32 : (int32_t)__builtin_clz((unsigned int)x);
}

/* Packed 16-bit pairs (bits 0-15 bottom lane, 16-31 top lane): the ARMv7E-M DSP instructions
   through ACLE on cores with the DSP extension, exact portable C elsewhere (host, Cortex-M0+/M3).
   Results wrap to 32 bits. */
#if (defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_SAT) && __ARM_FEATURE_SAT)
#include <arm_acle.h>
#endif
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
static inline int32_t aot_smlad(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)__smlad((uint32_t)a, (uint32_t)b, (uint32_t)acc);
}
static inline int32_t aot_smlabb(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)__smlabb((uint32_t)a, (uint32_t)b, (uint32_t)acc);
}
static inline int32_t aot_smlatt(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)__smlatt((uint32_t)a, (uint32_t)b, (uint32_t)acc);
}
static inline int32_t aot_smlabt(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)__smlabt((uint32_t)a, (uint32_t)b, (uint32_t)acc);
}
static inline int32_t aot_smlatb(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)__smlatb((uint32_t)a, (uint32_t)b, (uint32_t)acc);
}
static inline int32_t aot_sxtb16(int32_t x) { return (int32_t)__sxtb16((uint32_t)x); }
static inline int32_t aot_sxtab16(int32_t a, int32_t x) { return (int32_t)__sxtab16((uint32_t)a, (uint32_t)x); }
#if defined(__GNUC__)
/* ACLE has no rotated forms; one instruction instead of a ror and an extend */
static inline int32_t aot_sxtb16_ror8(int32_t x) {
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return (int32_t)r;
}
static inline int32_t aot_sxtab16_ror8(int32_t a, int32_t x) {
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return (int32_t)r;
}
#else
static inline int32_t aot_sxtb16_ror8(int32_t x) {
    return (int32_t)__sxtb16(((uint32_t)x >> 8) | ((uint32_t)x << 24));
}
static inline int32_t aot_sxtab16_ror8(int32_t a, int32_t x) {
    return (int32_t)__sxtab16((uint32_t)a, ((uint32_t)x >> 8) | ((uint32_t)x << 24));
}
#endif
#else
static inline int32_t aot_bot16(int32_t x) { return (int32_t)(int16_t)x; }
static inline int32_t aot_top16(int32_t x) { return x >> 16; }
static inline int32_t aot_smlad(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)((uint32_t)acc + (uint32_t)(aot_bot16(a) * aot_bot16(b)) + (uint32_t)(aot_top16(a) * aot_top16(b)));
}
static inline int32_t aot_smlabb(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)((uint32_t)acc + (uint32_t)(aot_bot16(a) * aot_bot16(b)));
}
static inline int32_t aot_smlatt(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)((uint32_t)acc + (uint32_t)(aot_top16(a) * aot_top16(b)));
}
static inline int32_t aot_smlabt(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)((uint32_t)acc + (uint32_t)(aot_bot16(a) * aot_top16(b)));
}
static inline int32_t aot_smlatb(int32_t a, int32_t b, int32_t acc) {
    return (int32_t)((uint32_t)acc + (uint32_t)(aot_top16(a) * aot_bot16(b)));
}
static inline int32_t aot_pair16(uint32_t lo, uint32_t hi) { return (int32_t)((lo & 0xFFFFu) | (hi << 16)); }
static inline int32_t aot_sxtb16(int32_t x) {
    return aot_pair16((uint32_t)(int32_t)(int8_t)x, (uint32_t)(int32_t)(int8_t)(x >> 16));
}
static inline int32_t aot_sxtb16_ror8(int32_t x) {
    return aot_pair16((uint32_t)(int32_t)(int8_t)(x >> 8), (uint32_t)(int32_t)(int8_t)(x >> 24));
}
static inline int32_t aot_sxtab16(int32_t a, int32_t x) {
    return aot_pair16((uint32_t)a + (uint32_t)(int32_t)(int8_t)x,
                      ((uint32_t)a >> 16) + (uint32_t)(int32_t)(int8_t)(x >> 16));
}
static inline int32_t aot_sxtab16_ror8(int32_t a, int32_t x) {
    return aot_pair16((uint32_t)a + (uint32_t)(int32_t)(int8_t)(x >> 8),
                      ((uint32_t)a >> 16) + (uint32_t)(int32_t)(int8_t)(x >> 24));
}
#endif
/* x clamped to [-128, 127]: one SSAT on Cortex-M3 and up */
#if defined(__ARM_FEATURE_SAT) && __ARM_FEATURE_SAT
static inline int32_t aot_ssat8(int32_t x) { return (int32_t)__ssat(x, 8); }
#else
static inline int32_t aot_ssat8(int32_t x) { return x < -128 ? -128 : (x > 127 ? 127 : x); }
#endif
/* x clamped to [-32768, 32767] and to [0, 32767] (int16 outputs, a ReLU's): one SSAT / USAT */
#if defined(__ARM_FEATURE_SAT) && __ARM_FEATURE_SAT
static inline int32_t aot_ssat16(int32_t x) { return (int32_t)__ssat(x, 16); }
static inline int32_t aot_usat15(int32_t x) { return (int32_t)__usat(x, 15); }
#else
static inline int32_t aot_ssat16(int32_t x) { return x < -32768 ? -32768 : (x > 32767 ? 32767 : x); }
static inline int32_t aot_usat15(int32_t x) { return x < 0 ? 0 : (x > 32767 ? 32767 : x); }
#endif
/* (lo, hi) -> pair; compilers emit PKHBT for this pattern */
static inline int32_t aot_pack16(int32_t lo, int32_t hi) {
    return (int32_t)(((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16));
}
/* the bottom (pair_lo) or top (pair_hi) lanes of a and b as one pair: PKHBT / PKHTB */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
static inline int32_t aot_pair_lo(int32_t a, int32_t b) {
    int32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
static inline int32_t aot_pair_hi(int32_t a, int32_t b) {
    int32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
}
#else
static inline int32_t aot_pair_lo(int32_t a, int32_t b) { return aot_pack16(a, b); }
static inline int32_t aot_pair_hi(int32_t a, int32_t b) {
    return (int32_t)(((uint32_t)a >> 16) | ((uint32_t)b & 0xFFFF0000u));
}
#endif
/* four bytes at p as a little-endian int32, any alignment (one LDR on Cortex-M3 and up) */
static inline int32_t aot_load_word(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (int32_t)((uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24));
}
/* requantize + output offset as one 32x32->64 multiply-accumulate (see aot/lower/schedule/requant.py) */
static inline int32_t aot_requant_q31(int32_t y, int32_t m, int32_t lo, int32_t hi, int32_t rs) {
    uint64_t n = ((uint64_t)(uint32_t)hi << 32) | (uint64_t)(uint32_t)lo;
    n += (uint64_t)((int64_t)y * (int64_t)m);
    n += (uint64_t)(int64_t)(y & INT32_MIN);
    return (int32_t)(uint32_t)(n >> 32) >> rs;
}

/* requant_q31 of acc from y2 = 2 * acc and h = 2 * hi + (lo >> 31): SMMLAR, ADD y2 ASR 31, ASR
   (exact where the schedule checked that nothing leaves int32; aot/lower/schedule/requant.py) */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
static inline int32_t aot_requant_mm(int32_t y2, int32_t m, int32_t h, int32_t r) {
    int32_t t;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(t) : "r"(y2), "r"(m), "r"(h));
    return (int32_t)((uint32_t)t - (uint32_t)(y2 < 0)) >> r;
}
#elif defined(__riscv) && __riscv_xlen == 32 && defined(__riscv_mul)
/* RV32IM: MUL, MULH; the rounding 2^31 added to the low word carries out exactly when its top
   bit is set, so the high word is MULH + h + (low >> 31) */
static inline int32_t aot_requant_mm(int32_t y2, int32_t m, int32_t h, int32_t r) {
    uint32_t lo = (uint32_t)y2 * (uint32_t)m;
    int32_t hi = (int32_t)(((int64_t)y2 * (int64_t)m) >> 32);
    int32_t t = (int32_t)((uint32_t)hi + (uint32_t)h + (lo >> 31));
    return (int32_t)((uint32_t)t - (uint32_t)(y2 < 0)) >> r;
}
#else
static inline int32_t aot_requant_mm(int32_t y2, int32_t m, int32_t h, int32_t r) {
    uint64_t n = ((uint64_t)(uint32_t)h << 32) + (uint64_t)((int64_t)y2 * (int64_t)m) + (UINT64_C(1) << 31);
    int32_t t = (int32_t)(uint32_t)(n >> 32);
    return (int32_t)((uint32_t)t - (uint32_t)(y2 < 0)) >> r;
}
#endif

/* requant_mm without the sign correction (SMMLAR, ASR): where a ReLU-like clamp makes them agree
   (aot.kernel.intrinsics.requant_mm_nn) */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
static inline int32_t aot_requant_mm_nn(int32_t y2, int32_t m, int32_t h, int32_t r) {
    int32_t t;
    if (__builtin_constant_p(r)) {  /* a constant shift: gcc folds it into the SSAT that follows */
        __asm__("smmlar %0, %1, %2, %3" : "=r"(t) : "r"(y2), "r"(m), "r"(h));
        return t >> r;
    }
    /* a shift by register in the same asm: with it in C, gcc -O2 spilled in the loops around
       (micro_speech on mps2-an386: 9% more instructions) */
    __asm__("smmlar %0, %1, %2, %3\n\tasr %0, %0, %4" : "=&r"(t) : "r"(y2), "r"(m), "r"(h), "r"(r));
    return t;
}
#elif defined(__riscv) && __riscv_xlen == 32 && defined(__riscv_mul)
static inline int32_t aot_requant_mm_nn(int32_t y2, int32_t m, int32_t h, int32_t r) {
    uint32_t lo = (uint32_t)y2 * (uint32_t)m;
    int32_t hi = (int32_t)(((int64_t)y2 * (int64_t)m) >> 32);
    return (int32_t)((uint32_t)hi + (uint32_t)h + (lo >> 31)) >> r;
}
#else
static inline int32_t aot_requant_mm_nn(int32_t y2, int32_t m, int32_t h, int32_t r) {
    uint64_t n = ((uint64_t)(uint32_t)h << 32) + (uint64_t)((int64_t)y2 * (int64_t)m) + (UINT64_C(1) << 31);
    return (int32_t)(uint32_t)(n >> 32) >> r;
}
#endif

/* SMMLA (no rounding), ASR: the requantization with one shift for all channels
   (aot.kernel.intrinsics.requant_mma); a constant shift folds into the SSAT that follows */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
static inline int32_t aot_requant_mma(int32_t y2, int32_t m, int32_t h, int32_t r) {
    int32_t t;
    __asm__("smmla %0, %1, %2, %3" : "=r"(t) : "r"(y2), "r"(m), "r"(h));
    return t >> r;
}
#else
static inline int32_t aot_requant_mma(int32_t y2, int32_t m, int32_t h, int32_t r) {
    uint64_t n = ((uint64_t)(uint32_t)h << 32) + (uint64_t)((int64_t)y2 * (int64_t)m);
    return (int32_t)(uint32_t)(n >> 32) >> r;
}
#endif

/* (a b + 2^31) >> 32: SMMULR, the rounded high word (aot.kernel.intrinsics.smmulr; the 16x8
   requantization of an exact int32 accumulator, aot/lower/schedule/requant16.py) */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
static inline int32_t aot_smmulr(int32_t a, int32_t b) {
    int32_t t;
    __asm__("smmulr %0, %1, %2" : "=r"(t) : "r"(a), "r"(b));
    return t;
}
#else
static inline int32_t aot_smmulr(int32_t a, int32_t b) {
    return (int32_t)(uint32_t)(((uint64_t)((int64_t)a * (int64_t)b) + (UINT64_C(1) << 31)) >> 32);
}
#endif

/* the int64 at p (aot.kernel.intrinsics.load64). With gcc on Thumb-2 the value passes an empty
   asm that needs it in a register pair, so the load stays one LDRD instead of two loads placed
   apart. aot_load64_fresh (aot.kernel.intrinsics.load64_fresh) makes the LDRD itself a volatile asm
   (memory operand "Uv": base register and offset within +-1020, a multiple of 4, as LDRD takes): gcc
   then neither forwards a value stored there before, nor keeps the array in registers, nor hoists
   the load out of its loop. The C printer calls it as aot_load64_stack for every load64 from a
   local array (where gcc spilled the values: a copy of the whole array per outer iteration). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__thumb2__)
static inline int64_t aot_load64(const int64_t *p) {
    int64_t v = *p;
    __asm__("" : "+r"(v));
    return v;
}
static inline int64_t aot_load64_fresh(const int64_t *p) {
    int64_t v;
    __asm__ volatile("ldrd %Q0, %R0, %1" : "=r"(v) : "Uv"(*p));
    return v;
}
#else
static inline int64_t aot_load64(const int64_t *p) { return *p; }
static inline int64_t aot_load64_fresh(const int64_t *p) { return *p; }
#endif
static inline int64_t aot_load64_stack(const int64_t *p) { return aot_load64_fresh(p); }

static inline float aot_expf(float x) { return expf(x); }
static inline float aot_tanhf(float x) { return tanhf(x); }
static inline float aot_sqrtf(float x) { return sqrtf(x); }
static inline float aot_logf(float x) { return logf(x); }
static inline float aot_erff(float x) { return erff(x); }
static inline float aot_powf(float x, float y) { return powf(x, y); }
static inline float aot_roundf(float x) { return roundf(x); }
static inline float aot_sinf(float x) { return sinf(x); }
static inline float aot_cosf(float x) { return cosf(x); }
static inline float aot_floorf(float x) { return floorf(x); }
static inline float aot_ceilf(float x) { return ceilf(x); }
static inline float aot_expm1f(float x) { return expm1f(x); }
static inline float aot_fmodf(float x, float y) { return fmodf(x, y); }
/* floor(a / b) with the division in double (TensorFlow Lite's FloorDiv<float>) */
static inline float aot_floordivf(float x, float y) { return (float)floor((double)x / (double)y); }
/* TFLM's SSD box decoding (detection_postprocess.cc), in double rounded to float */
static inline float aot_ssd_centerf(float v, float s, float size, float c) {
    return (float)((double)v / (double)s * (double)size + (double)c);
}
static inline float aot_ssd_halff(float v, float s, float size) {
    return (float)(0.5 * exp((double)v / (double)s) * (double)size);
}

/* guarded builds (--guards): report the overwritten buffer and the kernel after which its
   canary was found (NUL-terminated names in the model's constants), then fail */
static inline int32_t aot_guard_fail(const uint8_t *buffer, const uint8_t *kernel) {
    aot_guard_report((const char *)buffer, (const char *)kernel);
    return AOT_ERR_GUARD;
}

/* Intrinsics with several results (aot/kernel/intrinsics_multi.py), as statement macros: the
   targets, then the arguments; an "&" argument is a pointer, the "#" one after it a constant word
   offset. On DSP cores (Thumb-2) with optimisation one inline-asm statement, whose register allocation gcc
   cannot spoil (its scheduler otherwise hoists loads until the 14 registers spill); at -O0 gcc has
   too few registers for its 16 operands, and elsewhere the same arithmetic in portable C. */
/* Registers one inline-asm statement may take, of the 14 that Thumb-2 code can allocate (r0-r12, lr).
   14 by default. 13 on Armv8.1-M (Cortex-M55, M85): gcc may turn any loop around the statement into a
   low-overhead loop (DLS/LE) whose count lives in lr. The generated model's internal header sets it for
   the core it was compiled for; a build that reserves more registers sets it lower: 13 with a frame
   pointer (-fno-omit-frame-pointer keeps r7), one less again for each -ffixed-rN (e.g. r9 under an RTOS).
   A statement that needs more registers than allowed takes its narrower form or the portable C below
   (the same arithmetic). aot.lower.schedule.target.asm_registers gives the value per core. */
#ifndef AOT_ASM_REGS
#if defined(__ARM_FEATURE_MVE) && __ARM_FEATURE_MVE
#define AOT_ASM_REGS 13
#else
#define AOT_ASM_REGS 14
#endif
#endif
#if defined(__GNUC__) && defined(__OPTIMIZE__) && defined(__thumb2__) && defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define AOT_DSP_ASM_ 1
#else
#define AOT_DSP_ASM_ 0
#endif
/* The asm forms below are defined everywhere (a macro costs nothing until used); the public names
   (aot_smlad_lohi_2x4, ...) are bound after the portable forms, by AOT_DSP_ASM_ and AOT_ASM_REGS. */
/* Half of a lohi 2-pixel x 4-channel step, as asm text: the weight word in register w holds two
   channels' int8 pairs; its odd bytes (SMLAD of the whole word: bytes 1 and 3 against the pixel's
   int16 lanes) go to the "hi" accumulators of both pixels, then SXTB16 extends its even bytes for
   the "lo" ones. The pixels' column words are x0, x1. */
#define AOT_LOHI_HALF_(w, a_hi, b_hi, a_lo, b_lo) \
    "smlad %[" a_hi "], %[x0], %[" w "], %[" a_hi "]\n\t" \
    "smlad %[" b_hi "], %[x1], %[" w "], %[" b_hi "]\n\t" \
    "sxtb16 %[" w "], %[" w "]\n\t" \
    "smlad %[" a_lo "], %[x0], %[" w "], %[" a_lo "]\n\t" \
    "smlad %[" b_lo "], %[x1], %[" w "], %[" b_lo "]\n\t"
/* the whole step's MACs: with the two weight words in w0, w1 (14 registers), or both through w0, the
   second loaded by `load1` between the halves (13 registers) */
#define AOT_LOHI_MACS_ AOT_LOHI_HALF_("w0", "a1", "b1", "a0", "b0") AOT_LOHI_HALF_("w1", "a3", "b3", "a2", "b2")
/* one pixel's four products (x0 by the low and high pairs of w0 and w1) */
#define AOT_LOHI_MACS1_ \
    "smlad %[a1], %[x0], %[w0], %[a1]\n\t" \
    "sxtb16 %[w0], %[w0]\n\t" \
    "smlad %[a0], %[x0], %[w0], %[a0]\n\t" \
    "smlad %[a3], %[x0], %[w1], %[a3]\n\t" \
    "sxtb16 %[w1], %[w1]\n\t" \
    "smlad %[a2], %[x0], %[w1], %[a2]"
/* the single steps' outputs (accumulators, then the loaded words), then their accumulator inputs tied to them */
#define AOT_LOHI_2X4_OPERANDS_(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7) \
    [a0] "=r"(o0), [a1] "=r"(o1), [a2] "=r"(o2), [a3] "=r"(o3), \
    [b0] "=r"(o4), [b1] "=r"(o5), [b2] "=r"(o6), [b3] "=r"(o7), \
    [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [w0] "=&r"(aot_w0_), [w1] "=&r"(aot_w1_) \
    : "0"(i0), "1"(i1), "2"(i2), "3"(i3), "4"(i4), "5"(i5), "6"(i6), "7"(i7)
#define AOT_LOHI_1X4_OPERANDS_(o0, o1, o2, o3, i0, i1, i2, i3) \
    [a0] "=r"(o0), [a1] "=r"(o1), [a2] "=r"(o2), [a3] "=r"(o3), \
    [x0] "=&r"(aot_x0_), [w0] "=&r"(aot_w0_), [w1] "=&r"(aot_w1_) \
    : "0"(i0), "1"(i1), "2"(i2), "3"(i3)
#define AOT_LOHI13_MACS_(load1) AOT_LOHI_HALF_("w0", "a1", "b1", "a0", "b0") load1 \
    AOT_LOHI_HALF_("w0", "a3", "b3", "a2", "b2")
/* one lohi 2-pixel x 4-channel step in 13 registers: the two weight words by two LDRs into one register
   (13 instructions for 16 MACs instead of 12) */
#define aot_asm13_smlad_lohi_2x4(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7, cp, cw, wp, ww) \
    do { \
        int32_t aot_x0_, aot_x1_, aot_w0_; \
        __asm__("ldrd %[x0], %[x1], [%[c], %[co]]\n\t" \
                "ldr %[w0], [%[w], %[wo]]\n\t" \
                AOT_LOHI13_MACS_("ldr %[w0], [%[w], %[wo4]]\n\t") \
                : [a0] "=r"(o0), [a1] "=r"(o1), [a2] "=r"(o2), [a3] "=r"(o3), \
                  [b0] "=r"(o4), [b1] "=r"(o5), [b2] "=r"(o6), [b3] "=r"(o7), \
                  [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [w0] "=&r"(aot_w0_) \
                : "0"(i0), "1"(i1), "2"(i2), "3"(i3), "4"(i4), "5"(i5), "6"(i6), "7"(i7), \
                  [c] "r"(cp), [w] "r"(wp), [co] "i"(4 * (cw)), [wo] "i"(4 * (ww)), [wo4] "i"(4 * (ww) + 4) \
                : "memory"); \
    } while (0)
/* one lohi 2-pixel x 4-channel step: LDRD, LDRD, 8 SMLAD, 2 SXTB16. Thumb-2 only: there LDRD
   takes any two registers (ARM state needs an even/odd pair). (Accumulators in r0-r7 and the rest
   in r8-r12/lr, "l"/"h", saved two MOVs per loop iteration but cost more around the loop:
   MobileNet +6,500 instructions.) */
#define aot_asm_smlad_lohi_2x4(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7, cp, cw, wp, ww) \
    do { \
        int32_t aot_x0_, aot_x1_, aot_w0_, aot_w1_; \
        __asm__("ldrd %[x0], %[x1], [%[c], %[co]]\n\t" \
                "ldrd %[w0], %[w1], [%[w], %[wo]]\n\t" \
                AOT_LOHI_MACS_ \
                : AOT_LOHI_2X4_OPERANDS_(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7), \
                  [c] "r"(cp), [w] "r"(wp), [co] "i"(4 * (cw)), [wo] "i"(4 * (ww)) \
                : "memory"); \
    } while (0)
/* the same for one pixel: LDR, LDRD, 4 SMLAD, 2 SXTB16 */
#define aot_asm_smlad_lohi_1x4(o0, o1, o2, o3, i0, i1, i2, i3, cp, cw, wp, ww) \
    do { \
        int32_t aot_x0_, aot_w0_, aot_w1_; \
        __asm__("ldr %[x0], [%[c], %[co]]\n\t" \
                "ldrd %[w0], %[w1], [%[w], %[wo]]\n\t" \
                AOT_LOHI_MACS1_ \
                : AOT_LOHI_1X4_OPERANDS_(o0, o1, o2, o3, i0, i1, i2, i3), \
                  [c] "r"(cp), [w] "r"(wp), [co] "i"(4 * (cw)), [wo] "i"(4 * (ww)) \
                : "memory"); \
    } while (0)
/* the same two steps for fewest cycles (AOT_OPTIMIZE_CYCLES, Cortex-M3/M4): the words by single LDRs, which
   pipeline (2x4: 2 + 1 + 1 + 1 = 5 cycles where two LDRDs, which pipeline with nothing, take 3 + 3; 1x4:
   4 where LDR and LDRD take 2 + 3), in registers gcc chooses (r0-r3 fixed, as the cycles loop
   aot_asmc_lohi_2x4_x16 takes them, cost register moves around kws_int8's unrolled steps on
   NUCLEO-L4R5ZI: 3,545,718 estimated cycles where free registers gave 3,531,878) */
#define aot_asmc_smlad_lohi_2x4(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7, cp, cw, wp, ww) \
    do { \
        int32_t aot_x0_, aot_x1_, aot_w0_, aot_w1_; \
        __asm__("ldr %[x0], [%[c], %[co]]\n\t" \
                "ldr %[x1], [%[c], %[co4]]\n\t" \
                "ldr %[w0], [%[w], %[wo]]\n\t" \
                "ldr %[w1], [%[w], %[wo4]]\n\t" \
                AOT_LOHI_MACS_ \
                : AOT_LOHI_2X4_OPERANDS_(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7), \
                  [c] "r"(cp), [w] "r"(wp), [co] "i"(4 * (cw)), [co4] "i"(4 * (cw) + 4), \
                  [wo] "i"(4 * (ww)), [wo4] "i"(4 * (ww) + 4) \
                : "memory"); \
    } while (0)
#define aot_asmc_smlad_lohi_1x4(o0, o1, o2, o3, i0, i1, i2, i3, cp, cw, wp, ww) \
    do { \
        int32_t aot_x0_, aot_w0_, aot_w1_; \
        __asm__("ldr %[x0], [%[c], %[co]]\n\t" \
                "ldr %[w0], [%[w], %[wo]]\n\t" \
                "ldr %[w1], [%[w], %[wo4]]\n\t" \
                AOT_LOHI_MACS1_ \
                : AOT_LOHI_1X4_OPERANDS_(o0, o1, o2, o3, i0, i1, i2, i3), \
                  [c] "r"(cp), [w] "r"(wp), [co] "i"(4 * (cw)), [wo] "i"(4 * (ww)), [wo4] "i"(4 * (ww) + 4) \
                : "memory"); \
    } while (0)
/* a 3x3 window of a depthwise block of n outputs (aot.kernel.intrinsics_multi.dw3_ops), accumulators from
   the word at wp (the bias): per kernel row the input words two at a time (LDRD; a last odd one LDR), its two weight
   words (LDRD), 2 n multiply-accumulates. One kernel row per (stride, n), AOT_DW3_S<stride>_<n>_(p, ro, wo, b0, ...):
   the row's pointer and word-offset operand names, its weight byte offset (from word wo), and the addends of the
   first multiply-accumulate of each accumulator but the last (string literals); AOT_DW3_WIN<n>_ stacks three rows:
   row 0 adds to the bias (loaded into the last accumulator), rows 1, 2 to each accumulator itself. */
#define AOT_DW3_LDRD_(p, ro, off) "ldrd %[x0], %[x1], [%[" p "], #4*%c[" ro "]+" #off "]\n\t"
#define AOT_DW3_LDR_(p, ro, off) "ldr %[x0], [%[" p "], #4*%c[" ro "]+" #off "]\n\t"
#define AOT_DW3_LDW_(wo) "ldrd %[w0], %[w1], [%[w], #4*%c[wo]+" wo "]\n\t"
#define AOT_DW3_S1_3_(p, ro, wo, b0, b1) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlatb %[a1], %[x0], %[w0], %[" b1 "]\n\t" \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x1], %[w0], %[a2]\n\t" \
    AOT_DW3_LDR_(p, ro, 8) \
    "smlabt %[a2], %[x0], %[w1], %[a2]"
#define AOT_DW3_S1_4_(p, ro, wo, b0, b1, b2) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlatb %[a1], %[x0], %[w0], %[" b1 "]\n\t" \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x1], %[w0], %[" b2 "]\n\t" \
    "smlatb %[a3], %[x1], %[w0], %[a3]\n\t" \
    AOT_DW3_LDR_(p, ro, 8) \
    "smlabt %[a2], %[x0], %[w1], %[a2]\n\t" \
    "smlad %[a3], %[x0], %[w1], %[a3]"
#define AOT_DW3_S1_6_(p, ro, wo, b0, b1, b2, b3, b4) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlatb %[a1], %[x0], %[w0], %[" b1 "]\n\t" \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x1], %[w0], %[" b2 "]\n\t" \
    "smlatb %[a3], %[x1], %[w0], %[" b3 "]\n\t" \
    AOT_DW3_LDRD_(p, ro, 8) \
    "smlabt %[a2], %[x0], %[w1], %[a2]\n\t" \
    "smlad %[a3], %[x0], %[w1], %[a3]\n\t" \
    "smlad %[a4], %[x0], %[w0], %[" b4 "]\n\t" \
    "smlatb %[a5], %[x0], %[w0], %[a5]\n\t" \
    "smlabt %[a4], %[x1], %[w1], %[a4]\n\t" \
    "smlad %[a5], %[x1], %[w1], %[a5]"
#define AOT_DW3_S2_3_(p, ro, wo, b0, b1) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlabb %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w0], %[" b1 "]\n\t" \
    AOT_DW3_LDRD_(p, ro, 8) \
    "smlabb %[a1], %[x0], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x0], %[w0], %[a2]\n\t" \
    "smlabb %[a2], %[x1], %[w1], %[a2]"
#define AOT_DW3_S2_4_(p, ro, wo, b0, b1, b2) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlabb %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w0], %[" b1 "]\n\t" \
    AOT_DW3_LDRD_(p, ro, 8) \
    "smlabb %[a1], %[x0], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x0], %[w0], %[" b2 "]\n\t" \
    "smlabb %[a2], %[x1], %[w1], %[a2]\n\t" \
    "smlad %[a3], %[x1], %[w0], %[a3]\n\t" \
    AOT_DW3_LDR_(p, ro, 16) \
    "smlabb %[a3], %[x0], %[w1], %[a3]"
#define AOT_DW3_S2_6_(p, ro, wo, b0, b1, b2, b3, b4) \
    AOT_DW3_LDRD_(p, ro, 0) AOT_DW3_LDW_(wo) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlabb %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w0], %[" b1 "]\n\t" \
    AOT_DW3_LDRD_(p, ro, 8) \
    "smlabb %[a1], %[x0], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x0], %[w0], %[" b2 "]\n\t" \
    "smlabb %[a2], %[x1], %[w1], %[a2]\n\t" \
    "smlad %[a3], %[x1], %[w0], %[" b3 "]\n\t" \
    AOT_DW3_LDRD_(p, ro, 16) \
    "smlabb %[a3], %[x0], %[w1], %[a3]\n\t" \
    "smlad %[a4], %[x0], %[w0], %[" b4 "]\n\t" \
    "smlabb %[a4], %[x1], %[w1], %[a4]\n\t" \
    "smlad %[a5], %[x1], %[w0], %[a5]\n\t" \
    AOT_DW3_LDR_(p, ro, 24) \
    "smlabb %[a5], %[x0], %[w1], %[a5]"
#define AOT_DW3_WIN3_(row) "ldr %[a2], [%[w]]\n\t" \
    row("p0", "ro0", "0", "a2", "a2") "\n\t" \
    row("p1", "ro1", "8", "a0", "a1") "\n\t" \
    row("p2", "ro2", "16", "a0", "a1")
#define AOT_DW3_WIN4_(row) "ldr %[a3], [%[w]]\n\t" \
    row("p0", "ro0", "0", "a3", "a3", "a3") "\n\t" \
    row("p1", "ro1", "8", "a0", "a1", "a2") "\n\t" \
    row("p2", "ro2", "16", "a0", "a1", "a2")
#define AOT_DW3_WIN6_(row) "ldr %[a5], [%[w]]\n\t" \
    row("p0", "ro0", "0", "a5", "a5", "a5", "a5", "a5") "\n\t" \
    row("p1", "ro1", "8", "a0", "a1", "a2", "a3", "a4") "\n\t" \
    row("p2", "ro2", "16", "a0", "a1", "a2", "a3", "a4")
/* the window's requantization (aot_dw3x3q_s*): m, h = the words at wp + mo, mo + 1 (LDRD), per output SMMLA and
   SSAT 8 of it >> r (1 <= r <= 31): aot_ssat8(aot_requant_mma(acc, m, h, r)); AOT_DW3Q_RQ<n>_ follows the window
   (its leading newline ends the window's last line) */
#define AOT_DW3Q_RQ(a) "smmla %[" #a "], %[" #a "], %[x0], %[x1]\n\t" "ssat %[" #a "], #8, %[" #a "], asr #%c[r]\n\t"
#define AOT_DW3Q_RQ3_ "\n\tldrd %[x0], %[x1], [%[w], #4*%c[mo]]\n\t" AOT_DW3Q_RQ(a0) AOT_DW3Q_RQ(a1) AOT_DW3Q_RQ(a2)
#define AOT_DW3Q_RQ4_ AOT_DW3Q_RQ3_ AOT_DW3Q_RQ(a3)
#define AOT_DW3Q_RQ6_ AOT_DW3Q_RQ4_ AOT_DW3Q_RQ(a4) AOT_DW3Q_RQ(a5)
/* the operands: accumulators a0.. (outputs), scratch x0, x1, w0, w1; row pointers p0..p2 with their constant word
   offsets ro0..ro2, weights w with constant word offset wo (q: and mo, the shift r) */
#define AOT_DW3_OUT3_(o0, o1, o2) [a0] "=&r"(o0), [a1] "=&r"(o1), [a2] "=&r"(o2)
#define AOT_DW3_OUT4_(o0, o1, o2, o3) AOT_DW3_OUT3_(o0, o1, o2), [a3] "=&r"(o3)
#define AOT_DW3_OUT6_(o0, o1, o2, o3, o4, o5) AOT_DW3_OUT4_(o0, o1, o2, o3), [a4] "=&r"(o4), [a5] "=&r"(o5)
#define AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    [p0] "r"(x0p), [p1] "r"(x1p), [p2] "r"(x2p), [w] "r"(wp), \
    [ro0] "i"(x0w), [ro1] "i"(x1w), [ro2] "i"(x2w), [wo] "i"(ww)
#define AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww), [mo] "i"(qo), [r] "i"(qr)
#define AOT_DW3_ASM_(text, outs, ins) \
    do { \
        int32_t aot_x0_, aot_x1_, aot_w0_, aot_w1_; \
        __asm__(text \
                : outs, [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [w0] "=&r"(aot_w0_), [w1] "=&r"(aot_w1_) \
                : ins \
                : "memory"); \
    } while (0)
#define aot_asm_dw3x3_s1_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN3_(AOT_DW3_S1_3_), AOT_DW3_OUT3_(o0, o1, o2), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3_s1_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN4_(AOT_DW3_S1_4_), AOT_DW3_OUT4_(o0, o1, o2, o3), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3_s1_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN6_(AOT_DW3_S1_6_), AOT_DW3_OUT6_(o0, o1, o2, o3, o4, o5), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3_s2_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN3_(AOT_DW3_S2_3_), AOT_DW3_OUT3_(o0, o1, o2), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3_s2_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN4_(AOT_DW3_S2_4_), AOT_DW3_OUT4_(o0, o1, o2, o3), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3_s2_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_ASM_(AOT_DW3_WIN6_(AOT_DW3_S2_6_), AOT_DW3_OUT6_(o0, o1, o2, o3, o4, o5), \
                 AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3q_s1_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN3_(AOT_DW3_S1_3_) AOT_DW3Q_RQ3_, AOT_DW3_OUT3_(o0, o1, o2), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_asm_dw3x3q_s1_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN4_(AOT_DW3_S1_4_) AOT_DW3Q_RQ4_, AOT_DW3_OUT4_(o0, o1, o2, o3), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_asm_dw3x3q_s1_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN6_(AOT_DW3_S1_6_) AOT_DW3Q_RQ6_, AOT_DW3_OUT6_(o0, o1, o2, o3, o4, o5), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_asm_dw3x3q_s2_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN3_(AOT_DW3_S2_3_) AOT_DW3Q_RQ3_, AOT_DW3_OUT3_(o0, o1, o2), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_asm_dw3x3q_s2_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN4_(AOT_DW3_S2_4_) AOT_DW3Q_RQ4_, AOT_DW3_OUT4_(o0, o1, o2, o3), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_asm_dw3x3q_s2_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_ASM_(AOT_DW3_WIN6_(AOT_DW3_S2_6_) AOT_DW3Q_RQ6_, AOT_DW3_OUT6_(o0, o1, o2, o3, o4, o5), \
                 AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
/* A window of 5 outputs at stride 1 (dw3x3_s1_5, dw3x3q_s1_5: emitted by cycles builds only,
   aot.lower.schedule.depthwise_pairs, where a row of 5 took single products in C): per kernel row its
   two weight words and first three input words by five single LDRs, which pipeline on Cortex-M3/M4
   (6 cycles; the first row's run also loads the bias), their 9 multiply-accumulates, then the fourth
   word (LDR) for the last; the requantization's m, h load right behind the last row's fourth word (one
   run of three). 5 accumulators, 5 loaded words, the weight pointer and the rows' pointers: 12
   registers when the three rows share one pointer (the schedule passes one base with three offsets),
   which leaves gcc the loop's output pointer (six words a row measured the same: gcc kept it on the
   stack). */
#define AOT_DW3C_LDR_(x, p, ro, off) "ldr %[" x "], [%[" p "], #4*%c[" ro "]+" #off "]\n\t"
#define AOT_DW3C_S1_5_(p, ro, wo, b0, b1, b2, b3, tail) \
    "ldr %[w0], [%[w], #4*%c[wo]+" wo "]\n\t" \
    "ldr %[w1], [%[w], #4*%c[wo]+" wo "+4]\n\t" \
    AOT_DW3C_LDR_("x0", p, ro, 0) AOT_DW3C_LDR_("x1", p, ro, 4) AOT_DW3C_LDR_("x2", p, ro, 8) \
    "smlad %[a0], %[x0], %[w0], %[" b0 "]\n\t" \
    "smlatb %[a1], %[x0], %[w0], %[" b1 "]\n\t" \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t" \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t" \
    "smlad %[a2], %[x1], %[w0], %[" b2 "]\n\t" \
    "smlatb %[a3], %[x1], %[w0], %[" b3 "]\n\t" \
    "smlabt %[a2], %[x2], %[w1], %[a2]\n\t" \
    "smlad %[a3], %[x2], %[w1], %[a3]\n\t" \
    "smlad %[a4], %[x2], %[w0], %[a4]\n\t" \
    AOT_DW3C_LDR_("x0", p, ro, 12) tail \
    "smlabt %[a4], %[x0], %[w1], %[a4]"
#define AOT_DW3C_WIN5_(tail) "ldr %[a4], [%[w]]\n\t" \
    AOT_DW3C_S1_5_("p0", "ro0", "0", "a4", "a4", "a4", "a4", "") "\n\t" \
    AOT_DW3C_S1_5_("p1", "ro1", "8", "a0", "a1", "a2", "a3", "") "\n\t" \
    AOT_DW3C_S1_5_("p2", "ro2", "16", "a0", "a1", "a2", "a3", tail)
#define AOT_DW3C_MH_ "ldr %[x1], [%[w], #4*%c[mo]]\n\tldr %[x2], [%[w], #4*%c[mo]+4]\n\t"
#define AOT_DW3C_RQ(a) "smmla %[" #a "], %[" #a "], %[x1], %[x2]\n\t" "ssat %[" #a "], #8, %[" #a "], asr #%c[r]\n\t"
#define AOT_DW3C_RQ5_ "\n\t" AOT_DW3C_RQ(a0) AOT_DW3C_RQ(a1) AOT_DW3C_RQ(a2) AOT_DW3C_RQ(a3) AOT_DW3C_RQ(a4)
#define AOT_DW3_OUT5_(o0, o1, o2, o3, o4) AOT_DW3_OUT4_(o0, o1, o2, o3), [a4] "=&r"(o4)
#define AOT_DW3C_ASM_(text, outs, ins) \
    do { \
        int32_t aot_x0_, aot_x1_, aot_x2_, aot_w0_, aot_w1_; \
        __asm__(text \
                : outs, [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [x2] "=&r"(aot_x2_), \
                  [w0] "=&r"(aot_w0_), [w1] "=&r"(aot_w1_) \
                : ins \
                : "memory"); \
    } while (0)
#define aot_asm_dw3x3_s1_5(o0, o1, o2, o3, o4, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3C_ASM_(AOT_DW3C_WIN5_(""), AOT_DW3_OUT5_(o0, o1, o2, o3, o4), \
                  AOT_DW3_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww))
#define aot_asm_dw3x3q_s1_5(o0, o1, o2, o3, o4, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3C_ASM_(AOT_DW3C_WIN5_(AOT_DW3C_MH_) AOT_DW3C_RQ5_, AOT_DW3_OUT5_(o0, o1, o2, o3, o4), \
                  AOT_DW3Q_IN_(x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr))
#define aot_c_smlad_lohi_1x4(o0, o1, o2, o3, i0, i1, i2, i3, cp, cw, wp, ww) \
    do { \
        const int32_t *aot_c_ = (cp) + (cw), *aot_w_ = (wp) + (ww); \
        int32_t aot_x0_ = aot_c_[0], aot_w0_ = aot_w_[0], aot_w1_ = aot_w_[1]; \
        int32_t aot_l0_ = aot_sxtb16(aot_w0_), aot_l1_ = aot_sxtb16(aot_w1_); \
        int32_t aot_r0_ = aot_smlad(aot_x0_, aot_l0_, (i0)), aot_r1_ = aot_smlad(aot_x0_, aot_w0_, (i1)); \
        int32_t aot_r2_ = aot_smlad(aot_x0_, aot_l1_, (i2)), aot_r3_ = aot_smlad(aot_x0_, aot_w1_, (i3)); \
        (o0) = aot_r0_; (o1) = aot_r1_; (o2) = aot_r2_; (o3) = aot_r3_; \
    } while (0)
#define aot_c_smlad_lohi_2x4(o0, o1, o2, o3, o4, o5, o6, o7, i0, i1, i2, i3, i4, i5, i6, i7, cp, cw, wp, ww) \
    do { \
        const int32_t *aot_c_ = (cp) + (cw), *aot_w_ = (wp) + (ww); \
        int32_t aot_x0_ = aot_c_[0], aot_x1_ = aot_c_[1], aot_w0_ = aot_w_[0], aot_w1_ = aot_w_[1]; \
        int32_t aot_l0_ = aot_sxtb16(aot_w0_), aot_l1_ = aot_sxtb16(aot_w1_); \
        int32_t aot_r0_ = aot_smlad(aot_x0_, aot_l0_, (i0)), aot_r1_ = aot_smlad(aot_x0_, aot_w0_, (i1)); \
        int32_t aot_r2_ = aot_smlad(aot_x0_, aot_l1_, (i2)), aot_r3_ = aot_smlad(aot_x0_, aot_w1_, (i3)); \
        int32_t aot_r4_ = aot_smlad(aot_x1_, aot_l0_, (i4)), aot_r5_ = aot_smlad(aot_x1_, aot_w0_, (i5)); \
        int32_t aot_r6_ = aot_smlad(aot_x1_, aot_l1_, (i6)), aot_r7_ = aot_smlad(aot_x1_, aot_w1_, (i7)); \
        (o0) = aot_r0_; (o1) = aot_r1_; (o2) = aot_r2_; (o3) = aot_r3_; \
        (o4) = aot_r4_; (o5) = aot_r5_; (o6) = aot_r6_; (o7) = aot_r7_; \
    } while (0)
/* The portable 3x3 depthwise window of n outputs (aot.kernel.intrinsics_multi dw3x3_s{stride}_{n}):
   row k's input words at x[k], its weight pair words at w[2k], w[2k + 1] (taps 0,1 and 2), every
   accumulator starting at the bias. Stride 1: output 2m reads words m, m + 1 aligned, output 2m + 1
   straddles them (top of m with tap 0, then tap 1 and tap 2 from m + 1); stride 2: output i reads
   words i (taps 0,1) and i + 1 (tap 2). Sums wrap to 32 bits, so their order does not matter. */
static inline void aot_dw3x3_window(int stride, int n, const int32_t *x0, const int32_t *x1, const int32_t *x2,
                                    const int32_t *w, int32_t bias, int32_t *acc) {
    const int32_t *x[3] = {x0, x1, x2};
    int i, k;
    for (i = 0; i < n; ++i) {
        acc[i] = bias;
    }
    for (k = 0; k < 3; ++k) {
        const int32_t *r = x[k];
        int32_t w0 = w[2 * k], w1 = w[2 * k + 1];
        for (i = 0; i < n; ++i) {
            if (stride == 2) {
                acc[i] = aot_smlabb(r[i + 1], w1, aot_smlad(r[i], w0, acc[i]));
            } else if (i % 2 == 0) {
                acc[i] = aot_smlabt(r[i / 2 + 1], w1, aot_smlad(r[i / 2], w0, acc[i]));
            } else {
                acc[i] = aot_smlad(r[i / 2 + 1], w1, aot_smlatb(r[i / 2], w0, acc[i]));
            }
        }
    }
}
#define AOT_DW3X3_WINDOW(stride, n, acc, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    aot_dw3x3_window((stride), (n), (x0p) + (x0w), (x1p) + (x1w), (x2p) + (x2w), (wp) + (ww), (wp)[0], (acc))
/* the portable window then its requantization (aot_dw3x3q_s*): aot_ssat8(aot_requant_mma(acc, m, h, r)),
   m, h the words at wp + qo, qo + 1 */
static inline void aot_dw3q_requant(int n, int32_t *acc, const int32_t *mh, int32_t r) {
    int i;
    for (i = 0; i < n; ++i) {
        acc[i] = aot_ssat8(aot_requant_mma(acc[i], mh[0], mh[1], r));
    }
}
/* one macro for the twelve: the window of n outputs at `stride`, requantized when q, copied out by COPY */
#define AOT_DW3_PORTABLE_(stride, n, COPY, q, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    do { \
        int32_t aot_a_[n]; \
        AOT_DW3X3_WINDOW(stride, n, aot_a_, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww); \
        if (q) aot_dw3q_requant((n), aot_a_, (wp) + (qo), (qr)); \
        COPY; \
    } while (0)
#define AOT_DW3_COPY3_(o0, o1, o2) (o0) = aot_a_[0]; (o1) = aot_a_[1]; (o2) = aot_a_[2]
#define AOT_DW3_COPY4_(o0, o1, o2, o3) AOT_DW3_COPY3_(o0, o1, o2); (o3) = aot_a_[3]
#define AOT_DW3_COPY6_(o0, o1, o2, o3, o4, o5) AOT_DW3_COPY4_(o0, o1, o2, o3); (o4) = aot_a_[4]; (o5) = aot_a_[5]
#define AOT_DW3_COPY5_(o0, o1, o2, o3, o4) AOT_DW3_COPY4_(o0, o1, o2, o3); (o4) = aot_a_[4]
#define aot_c_dw3x3_s1_5(o0, o1, o2, o3, o4, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(1, 5, AOT_DW3_COPY5_(o0, o1, o2, o3, o4), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3q_s1_5(o0, o1, o2, o3, o4, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(1, 5, AOT_DW3_COPY5_(o0, o1, o2, o3, o4), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3_s1_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(1, 3, AOT_DW3_COPY3_(o0, o1, o2), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3_s1_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(1, 4, AOT_DW3_COPY4_(o0, o1, o2, o3), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3_s1_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(1, 6, AOT_DW3_COPY6_(o0, o1, o2, o3, o4, o5), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3_s2_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(2, 3, AOT_DW3_COPY3_(o0, o1, o2), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3_s2_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(2, 4, AOT_DW3_COPY4_(o0, o1, o2, o3), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3_s2_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww) \
    AOT_DW3_PORTABLE_(2, 6, AOT_DW3_COPY6_(o0, o1, o2, o3, o4, o5), 0, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, 0, 0)
#define aot_c_dw3x3q_s1_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(1, 3, AOT_DW3_COPY3_(o0, o1, o2), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3q_s1_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(1, 4, AOT_DW3_COPY4_(o0, o1, o2, o3), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3q_s1_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(1, 6, AOT_DW3_COPY6_(o0, o1, o2, o3, o4, o5), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3q_s2_3(o0, o1, o2, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(2, 3, AOT_DW3_COPY3_(o0, o1, o2), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3q_s2_4(o0, o1, o2, o3, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(2, 4, AOT_DW3_COPY4_(o0, o1, o2, o3), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
#define aot_c_dw3x3q_s2_6(o0, o1, o2, o3, o4, o5, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr) \
    AOT_DW3_PORTABLE_(2, 6, AOT_DW3_COPY6_(o0, o1, o2, o3, o4, o5), 1, x0p, x0w, x1p, x1w, x2p, x2w, wp, ww, qo, qr)
/* the public names: the asm form where it fits the register budget (lohi 2x4: 14 registers, or 13 in its
   narrower form; lohi 1x4: 9; a depthwise window of n outputs: n + 8), else the portable form */
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14 && defined(AOT_OPTIMIZE_CYCLES) && AOT_OPTIMIZE_CYCLES
#define aot_smlad_lohi_2x4 aot_asmc_smlad_lohi_2x4
#elif AOT_DSP_ASM_ && AOT_ASM_REGS >= 14
#define aot_smlad_lohi_2x4 aot_asm_smlad_lohi_2x4
#elif AOT_DSP_ASM_ && AOT_ASM_REGS >= 13
#define aot_smlad_lohi_2x4 aot_asm13_smlad_lohi_2x4
#else
#define aot_smlad_lohi_2x4 aot_c_smlad_lohi_2x4
#endif
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14 && defined(AOT_OPTIMIZE_CYCLES) && AOT_OPTIMIZE_CYCLES
#define aot_smlad_lohi_1x4 aot_asmc_smlad_lohi_1x4
#elif AOT_DSP_ASM_ && AOT_ASM_REGS >= 9
#define aot_smlad_lohi_1x4 aot_asm_smlad_lohi_1x4
#else
#define aot_smlad_lohi_1x4 aot_c_smlad_lohi_1x4
#endif
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 11
#define AOT_DW3_FORM3_(name) aot_asm_##name
#else
#define AOT_DW3_FORM3_(name) aot_c_##name
#endif
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 12
#define AOT_DW3_FORM4_(name) aot_asm_##name
#else
#define AOT_DW3_FORM4_(name) aot_c_##name
#endif
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14
#define AOT_DW3_FORM6_(name) aot_asm_##name
#else
#define AOT_DW3_FORM6_(name) aot_c_##name
#endif
/* the window of 5 (cycles builds): its asm form with 14 registers (13 and one for gcc's loop) */
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14
#define AOT_DW3_FORM5_(name) aot_asm_##name
#else
#define AOT_DW3_FORM5_(name) aot_c_##name
#endif
#define aot_dw3x3_s1_5 AOT_DW3_FORM5_(dw3x3_s1_5)
#define aot_dw3x3q_s1_5 AOT_DW3_FORM5_(dw3x3q_s1_5)
#define aot_dw3x3_s1_3 AOT_DW3_FORM3_(dw3x3_s1_3)
#define aot_dw3x3_s2_3 AOT_DW3_FORM3_(dw3x3_s2_3)
#define aot_dw3x3q_s1_3 AOT_DW3_FORM3_(dw3x3q_s1_3)
#define aot_dw3x3q_s2_3 AOT_DW3_FORM3_(dw3x3q_s2_3)
#define aot_dw3x3_s1_4 AOT_DW3_FORM4_(dw3x3_s1_4)
#define aot_dw3x3_s2_4 AOT_DW3_FORM4_(dw3x3_s2_4)
#define aot_dw3x3q_s1_4 AOT_DW3_FORM4_(dw3x3q_s1_4)
#define aot_dw3x3q_s2_4 AOT_DW3_FORM4_(dw3x3q_s2_4)
#define aot_dw3x3_s1_6 AOT_DW3_FORM6_(dw3x3_s1_6)
#define aot_dw3x3_s2_6 AOT_DW3_FORM6_(dw3x3_s2_6)
#define aot_dw3x3q_s1_6 AOT_DW3_FORM6_(dw3x3q_s1_6)
#define aot_dw3x3q_s2_6 AOT_DW3_FORM6_(dw3x3q_s2_6)

/* RISC-V vector (RVV 1.0) routines of the RV32 V schedules (before aot_helium.h: its column
   routine copies with them on V cores) */
#include "aot_rvv.h"

/* Helium (MVE) vector routines of the Cortex-M55 schedules */
#include "aot_helium.h"

/* x86-64 host routines of the host schedules */
#include "aot_x86.h"

/* A two-pixel lohi 4-channel block's reduction (aot.kernel.intrinsics_multi.lohi_2x4_x16): both pixels'
   accumulators from the biases wp[ww], .., wp[ww + 3], then 16 n steps of aot_smlad_lohi_2x4, step t
   reading the column words cp[cw + 2t], cp[cw + 2t + 1] and the weight words wp[ww + 4 + 2t],
   wp[ww + 5 + 2t]; n >= 1. On DSP cores one inline-asm loop of 16 steps per iteration after four LDRDs
   of the biases: the first step's LDRDs advance both pointers (post-indexed), the others read at
   negative offsets, and the loop ends with LDR of the end pointer (from the stack: the steps use all
   14 registers), CMP, BNE (a C loop around the single steps spent seven instructions: register moves,
   a reload and two pointer increments). */
/* the 16-step loop's start: both pixels' accumulators from the four biases (w advanced past them), then
   the first step's column words (c advanced by the whole iteration) */
#define AOT_LOHI_LOOP_HEAD_ \
    "ldrd %[a2], %[a3], [%[w], #8]\n\t" \
    "ldrd %[b0], %[b1], [%[w]]\n\t" \
    "ldrd %[b2], %[b3], [%[w], #8]\n\t" \
    "ldrd %[a0], %[a1], [%[w]], #16\n\t" \
    "1:\n\t" \
    "ldrd %[x0], %[x1], [%[c]], #128\n\t"
#define AOT_LOHI_STEP_(off) \
    "ldrd %[x0], %[x1], [%[c], #" off "]\n\t" \
    "ldrd %[w0], %[w1], [%[w], #" off "]\n\t" \
    AOT_LOHI_MACS_
#define aot_asm_lohi_2x4_x16(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    do { \
        const int32_t *aot_c_ = (cp) + (cw), *aot_w_ = (wp) + (ww); \
        const int32_t *aot_e_ = aot_c_ + 32 * (n); \
        int32_t aot_x0_, aot_x1_, aot_w0_, aot_w1_; \
        __asm__(AOT_LOHI_LOOP_HEAD_ \
                "ldrd %[w0], %[w1], [%[w]], #128\n\t" \
                AOT_LOHI_MACS_ \
                AOT_LOHI_STEP_("-120") \
                AOT_LOHI_STEP_("-112") \
                AOT_LOHI_STEP_("-104") \
                AOT_LOHI_STEP_("-96") \
                AOT_LOHI_STEP_("-88") \
                AOT_LOHI_STEP_("-80") \
                AOT_LOHI_STEP_("-72") \
                AOT_LOHI_STEP_("-64") \
                AOT_LOHI_STEP_("-56") \
                AOT_LOHI_STEP_("-48") \
                AOT_LOHI_STEP_("-40") \
                AOT_LOHI_STEP_("-32") \
                AOT_LOHI_STEP_("-24") \
                AOT_LOHI_STEP_("-16") \
                AOT_LOHI_STEP_("-8") \
                "ldr %[x0], %[e]\n\t" \
                "cmp %[c], %[x0]\n\t" \
                "bne 1b" \
                : [a0] "=&r"(o0), [a1] "=&r"(o1), [a2] "=&r"(o2), [a3] "=&r"(o3), \
                  [b0] "=&r"(o4), [b1] "=&r"(o5), [b2] "=&r"(o6), [b3] "=&r"(o7), \
                  [c] "+r"(aot_c_), [w] "+r"(aot_w_), \
                  [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [w0] "=&r"(aot_w0_), [w1] "=&r"(aot_w1_) \
                : [e] "m"(aot_e_) \
                : "memory", "cc"); \
    } while (0)
/* the same loop in 13 registers: each step's two weight words by two LDRs into one register */
#define AOT_LOHI13_STEP_(off, wnext) \
    "ldrd %[x0], %[x1], [%[c], #" off "]\n\t" \
    "ldr %[w0], [%[w], #" off "]\n\t" \
    AOT_LOHI13_MACS_("ldr %[w0], [%[w], #" wnext "]\n\t")
#define aot_asm13_lohi_2x4_x16(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    do { \
        const int32_t *aot_c_ = (cp) + (cw), *aot_w_ = (wp) + (ww); \
        const int32_t *aot_e_ = aot_c_ + 32 * (n); \
        int32_t aot_x0_, aot_x1_, aot_w0_; \
        __asm__(AOT_LOHI_LOOP_HEAD_ \
                "ldr %[w0], [%[w]], #128\n\t" \
                AOT_LOHI13_MACS_("ldr %[w0], [%[w], #-124]\n\t") \
                AOT_LOHI13_STEP_("-120", "-116") \
                AOT_LOHI13_STEP_("-112", "-108") \
                AOT_LOHI13_STEP_("-104", "-100") \
                AOT_LOHI13_STEP_("-96", "-92") \
                AOT_LOHI13_STEP_("-88", "-84") \
                AOT_LOHI13_STEP_("-80", "-76") \
                AOT_LOHI13_STEP_("-72", "-68") \
                AOT_LOHI13_STEP_("-64", "-60") \
                AOT_LOHI13_STEP_("-56", "-52") \
                AOT_LOHI13_STEP_("-48", "-44") \
                AOT_LOHI13_STEP_("-40", "-36") \
                AOT_LOHI13_STEP_("-32", "-28") \
                AOT_LOHI13_STEP_("-24", "-20") \
                AOT_LOHI13_STEP_("-16", "-12") \
                AOT_LOHI13_STEP_("-8", "-4") \
                "ldr %[x0], %[e]\n\t" \
                "cmp %[c], %[x0]\n\t" \
                "bne 1b" \
                : [a0] "=&r"(o0), [a1] "=&r"(o1), [a2] "=&r"(o2), [a3] "=&r"(o3), \
                  [b0] "=&r"(o4), [b1] "=&r"(o5), [b2] "=&r"(o6), [b3] "=&r"(o7), \
                  [c] "+r"(aot_c_), [w] "+r"(aot_w_), \
                  [x0] "=&r"(aot_x0_), [x1] "=&r"(aot_x1_), [w0] "=&r"(aot_w0_) \
                : [e] "m"(aot_e_) \
                : "memory", "cc"); \
    } while (0)
/* the portable lohi loop: `steps` single steps per count of n (the biases first, the weights after them) */
#define AOT_C_LOHI_LOOP_(steps, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    do { \
        const int32_t *aot_lw_ = (wp) + (ww); \
        int32_t aot_lt_; \
        (o0) = aot_lw_[0]; (o1) = aot_lw_[1]; (o2) = aot_lw_[2]; (o3) = aot_lw_[3]; \
        (o4) = aot_lw_[0]; (o5) = aot_lw_[1]; (o6) = aot_lw_[2]; (o7) = aot_lw_[3]; \
        for (aot_lt_ = 0; aot_lt_ < (steps) * (n); ++aot_lt_) { \
            aot_c_smlad_lohi_2x4(o0, o1, o2, o3, o4, o5, o6, o7, o0, o1, o2, o3, o4, o5, o6, o7, \
                                 (cp) + (cw), 2 * aot_lt_, aot_lw_ + 4, 2 * aot_lt_); \
        } \
    } while (0)
#define aot_c_lohi_2x4_x16(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    AOT_C_LOHI_LOOP_(16, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n)
/* The same loop for fewest cycles (AOT_OPTIMIZE_CYCLES, set by board builds with --optimize cycles): 16 steps
   per iteration, or 8 (twice the iterations) where the board's instruction cache is small
   (AOT_ICACHE_BYTES < 2048, set by the same builds): a block's output-channel loop and the column
   fill before it then fit a 1 KiB flash cache together (kws_int8 on NUCLEO-L4R5ZI: 12,700 misses
   where 16 steps missed 52,400). Each step's four words by four single LDRs, which pipeline on
   Cortex-M3/M4 (2 + 1 + 1 + 1 = 5 cycles, where LDRD, which pipelines with nothing, costs 3 + 3);
   the first step's two last loads post-indexed (the pointers' advance, no ADDs), the other steps
   at negative offsets. The four loaded words live in r0-r3 (fixed: with "l" alone gcc spilled
   around kws_int8's loop), both pointers in r0-r7. The biases: eight LDRs (9 cycles where two
   LDRDs and four MOVs took 10, and the first step's loads pipeline behind them). Two instructions
   more per step: instruction counts rise, cycles fall. */
#define AOT_LOHIC_STEP_(cx0, cx1) \
    "ldr %[x0], [%[c], #" cx0 "]\n\t" \
    "ldr %[x1], [%[c], #" cx1 "]\n\t" \
    "ldr %[w0], [%[w], #" cx0 "]\n\t" \
    "ldr %[w1], [%[w], #" cx1 "]\n\t" \
    AOT_LOHI_MACS_
#if defined(AOT_ICACHE_BYTES) && AOT_ICACHE_BYTES < 2048
#define AOT_LOHIC_BODY_ \
    "ldr %[x1], [%[c], #4]\n\t" \
    "ldr %[x0], [%[c]], #64\n\t" \
    "ldr %[w1], [%[w], #4]\n\t" \
    "ldr %[w0], [%[w]], #64\n\t" \
    AOT_LOHI_MACS_ \
    AOT_LOHIC_STEP_("-56", "-52") AOT_LOHIC_STEP_("-48", "-44") AOT_LOHIC_STEP_("-40", "-36") \
    AOT_LOHIC_STEP_("-32", "-28") AOT_LOHIC_STEP_("-24", "-20") AOT_LOHIC_STEP_("-16", "-12") \
    AOT_LOHIC_STEP_("-8", "-4")
#else
#define AOT_LOHIC_BODY_ \
    "ldr %[x1], [%[c], #4]\n\t" \
    "ldr %[x0], [%[c]], #128\n\t" \
    "ldr %[w1], [%[w], #4]\n\t" \
    "ldr %[w0], [%[w]], #128\n\t" \
    AOT_LOHI_MACS_ \
    AOT_LOHIC_STEP_("-120", "-116") AOT_LOHIC_STEP_("-112", "-108") AOT_LOHIC_STEP_("-104", "-100") \
    AOT_LOHIC_STEP_("-96", "-92") AOT_LOHIC_STEP_("-88", "-84") AOT_LOHIC_STEP_("-80", "-76") \
    AOT_LOHIC_STEP_("-72", "-68") AOT_LOHIC_STEP_("-64", "-60") AOT_LOHIC_STEP_("-56", "-52") \
    AOT_LOHIC_STEP_("-48", "-44") AOT_LOHIC_STEP_("-40", "-36") AOT_LOHIC_STEP_("-32", "-28") \
    AOT_LOHIC_STEP_("-24", "-20") AOT_LOHIC_STEP_("-16", "-12") AOT_LOHIC_STEP_("-8", "-4")
#endif
#define aot_asmc_lohi_2x4_x16(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    do { \
        const int32_t *aot_c_ = (cp) + (cw), *aot_w_ = (wp) + (ww); \
        const int32_t *aot_e_ = aot_c_ + 32 * (n); \
        register int32_t aot_x0_ __asm__("r0"), aot_x1_ __asm__("r1"), aot_w0_ __asm__("r2"), \
            aot_w1_ __asm__("r3"); \
        __asm__("ldr %[a1], [%[w], #4]\n\t" \
                "ldr %[a2], [%[w], #8]\n\t" \
                "ldr %[a3], [%[w], #12]\n\t" \
                "ldr %[b0], [%[w], #0]\n\t" \
                "ldr %[b1], [%[w], #4]\n\t" \
                "ldr %[b2], [%[w], #8]\n\t" \
                "ldr %[b3], [%[w], #12]\n\t" \
                "ldr %[a0], [%[w]], #16\n\t" \
                "1:\n\t" \
                AOT_LOHIC_BODY_ \
                "ldr %[x0], %[e]\n\t" \
                "cmp %[c], %[x0]\n\t" \
                "bne 1b" \
                : [a0] "=&r"(o0), [a1] "=&r"(o1), [a2] "=&r"(o2), [a3] "=&r"(o3), \
                  [b0] "=&r"(o4), [b1] "=&r"(o5), [b2] "=&r"(o6), [b3] "=&r"(o7), \
                  [c] "+l"(aot_c_), [w] "+l"(aot_w_), \
                  [x0] "=&l"(aot_x0_), [x1] "=&l"(aot_x1_), [w0] "=&l"(aot_w0_), [w1] "=&l"(aot_w1_) \
                : [e] "m"(aot_e_) \
                : "memory", "cc"); \
    } while (0)
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14 && defined(AOT_OPTIMIZE_CYCLES) && AOT_OPTIMIZE_CYCLES
#define aot_lohi_2x4_x16 aot_asmc_lohi_2x4_x16
#elif AOT_DSP_ASM_ && AOT_ASM_REGS >= 14
#define aot_lohi_2x4_x16 aot_asm_lohi_2x4_x16
#elif AOT_DSP_ASM_ && AOT_ASM_REGS >= 13
#define aot_lohi_2x4_x16 aot_asm13_lohi_2x4_x16
#else
#define aot_lohi_2x4_x16 aot_c_lohi_2x4_x16
#endif

/* lohi_2x4_x16, then its eight accumulators requantized (aot.kernel.intrinsics_multi.lohi_2x4_x16q):
   channel k's m, h, e at wp[ww + 4 + 32 n + 3 k], ..; a low channel's y = acc << e, a high one's
   y = (acc - low) >> e (hi 0) or << e (hi 1); each output aot_ssat8(aot_requant_mma(y, m, h, r)). */
#define AOT_LOHIQ_CH_(k, lo, hi_, lo_, hi2_) \
    do { \
        const int32_t *aot_q_ = aot_qp_ + 3 * (k); \
        int32_t aot_m_ = aot_q_[0], aot_h_ = aot_q_[1], aot_e_ = aot_q_[2]; \
        if ((k) % 2 == 0) { \
            lo_ = aot_ssat8(aot_requant_mma((int32_t)((uint32_t)(lo) << aot_e_), aot_m_, aot_h_, aot_r_)); \
            hi2_ = aot_ssat8(aot_requant_mma((int32_t)((uint32_t)(hi_) << aot_e_), aot_m_, aot_h_, aot_r_)); \
        } else { \
            lo_ = aot_ssat8(aot_requant_mma(AOT_LOHIQ_HIGH_(lo, aot_l0_, aot_e_), aot_m_, aot_h_, aot_r_)); \
            hi2_ = aot_ssat8(aot_requant_mma(AOT_LOHIQ_HIGH_(hi_, aot_l1_, aot_e_), aot_m_, aot_h_, aot_r_)); \
        } \
    } while (0)
#define AOT_LOHIQ_HIGH_(a, l, e) \
    (aot_hl_ ? (int32_t)(((uint32_t)(a) - (uint32_t)(l)) << (e)) : ((int32_t)((uint32_t)(a) - (uint32_t)(l)) >> (e)))
/* a lohi loop (`loop`: `words` weight words per count of n), then its eight accumulators requantized */
#define AOT_C_LOHIQ_(loop, words, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi) \
    do { \
        const int32_t *aot_qp_ = (wp) + (ww) + 4 + (words) * (n); \
        const int32_t aot_r_ = (r), aot_hl_ = (hi); \
        int32_t aot_l0_, aot_l1_; \
        loop(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n); \
        aot_l0_ = (o0); aot_l1_ = (o4); \
        AOT_LOHIQ_CH_(0, o0, o4, o0, o4); \
        AOT_LOHIQ_CH_(1, o1, o5, o1, o5); \
        aot_l0_ = (o2); aot_l1_ = (o6); \
        AOT_LOHIQ_CH_(2, o2, o6, o2, o6); \
        AOT_LOHIQ_CH_(3, o3, o7, o3, o7); \
    } while (0)
#define aot_c_lohi_2x4_x16q(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi) \
    AOT_C_LOHIQ_(aot_lohi_2x4_x16, 32, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi)
/* For fewest cycles (AOT_OPTIMIZE_CYCLES): the requantization in the same asm, in the loop's registers
   (the weight pointer has reached the constants): four SUBs (the high channels' differences), then per
   channel three pipelined LDRs (m, h, e) and per output a shift, SMMLA and SSAT (ASR r); where gcc, from
   the C form, reloaded the record and output pointers from the stack and paired the constants' loads
   into LDRDs (kws_int8 on NUCLEO-L4R5ZI: 3,516,760 core cycles where the C form took 3,542,924, about 6.6
   a block). The outputs come back to C, which stores them with STRBs in channel order (pixel by pixel,
   gcc merged each four into a word by a MOV, four BFIs and an STR). */
#define AOT_LOHIQ_HI_0 "asr"
#define AOT_LOHIQ_HI_1 "lsl"
#define AOT_LOHIQ_RQ_(a, b, mo, ho, eo, sh) \
    "ldr %[x0], [%[w], #" mo "]\n\t" \
    "ldr %[x1], [%[w], #" ho "]\n\t" \
    "ldr %[w0], [%[w], #" eo "]\n\t" \
    sh " %[" a "], %[" a "], %[w0]\n\t" \
    sh " %[" b "], %[" b "], %[w0]\n\t" \
    "smmla %[" a "], %[" a "], %[x0], %[x1]\n\t" \
    "smmla %[" b "], %[" b "], %[x0], %[x1]\n\t" \
    "ssat %[" a "], #8, %[" a "], asr %[rq]\n\t" \
    "ssat %[" b "], #8, %[" b "], asr %[rq]\n\t"
/* Its loop with both pointers 8 bytes behind the iteration's words: every step but the last at a positive
   offset (a 16-bit LDR: the block's loop, requantization and column fill then fit the 1 KiB instruction
   cache of NUCLEO-L4R5ZI, which the negative offsets' 32-bit LDRs overflowed), the last step's first loads
   pre-indexed with writeback (the pointers' advance). */
#define AOT_LOHIQ_STEP_(a, b) \
    "ldr %[x0], [%[c], #" a "]\n\t" \
    "ldr %[x1], [%[c], #" b "]\n\t" \
    "ldr %[w0], [%[w], #" a "]\n\t" \
    "ldr %[w1], [%[w], #" b "]\n\t" \
    AOT_LOHI_MACS_
#define AOT_LOHIQ_LAST_(adv) \
    "ldr %[x0], [%[c], #" adv "]!\n\t" \
    "ldr %[x1], [%[c], #4]\n\t" \
    "ldr %[w0], [%[w], #" adv "]!\n\t" \
    "ldr %[w1], [%[w], #4]\n\t" \
    AOT_LOHI_MACS_
#if defined(AOT_ICACHE_BYTES) && AOT_ICACHE_BYTES < 2048
#define AOT_LOHIQ_BODY_ \
    AOT_LOHIQ_STEP_("8", "12") AOT_LOHIQ_STEP_("16", "20") AOT_LOHIQ_STEP_("24", "28") \
    AOT_LOHIQ_STEP_("32", "36") AOT_LOHIQ_STEP_("40", "44") AOT_LOHIQ_STEP_("48", "52") \
    AOT_LOHIQ_STEP_("56", "60") AOT_LOHIQ_LAST_("64")
#else
#define AOT_LOHIQ_BODY_ \
    AOT_LOHIQ_STEP_("8", "12") AOT_LOHIQ_STEP_("16", "20") AOT_LOHIQ_STEP_("24", "28") \
    AOT_LOHIQ_STEP_("32", "36") AOT_LOHIQ_STEP_("40", "44") AOT_LOHIQ_STEP_("48", "52") \
    AOT_LOHIQ_STEP_("56", "60") AOT_LOHIQ_STEP_("64", "68") AOT_LOHIQ_STEP_("72", "76") \
    AOT_LOHIQ_STEP_("80", "84") AOT_LOHIQ_STEP_("88", "92") AOT_LOHIQ_STEP_("96", "100") \
    AOT_LOHIQ_STEP_("104", "108") AOT_LOHIQ_STEP_("112", "116") AOT_LOHIQ_STEP_("120", "124") \
    AOT_LOHIQ_LAST_("128")
#endif
/* the requantizing loops' start: the eight accumulators from the block's four biases (the high
   lanes' copies too), the weight pointer past them and 8 bytes behind the first step's words */
#define AOT_LOHIQ_BIASES_ \
    "ldr %[a1], [%[w], #4]\n\t" \
    "ldr %[a2], [%[w], #8]\n\t" \
    "ldr %[a3], [%[w], #12]\n\t" \
    "ldr %[b0], [%[w], #0]\n\t" \
    "ldr %[b1], [%[w], #4]\n\t" \
    "ldr %[b2], [%[w], #8]\n\t" \
    "ldr %[b3], [%[w], #12]\n\t" \
    "ldr %[a0], [%[w]], #8\n\t"
#define aot_asmc_lohi_2x4_x16q(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi) \
    do { \
        const int32_t *aot_c_ = (const int32_t *)((uintptr_t)((cp) + (cw)) - 8u), *aot_w_ = (wp) + (ww); \
        const int32_t *aot_e_ = (const int32_t *)((uintptr_t)((cp) + (cw) + 32 * (n)) - 8u); \
        register int32_t aot_x0_ __asm__("r0"), aot_x1_ __asm__("r1"), aot_w0_ __asm__("r2"), \
            aot_w1_ __asm__("r3"); \
        __asm__(AOT_LOHIQ_BIASES_ \
                "1:\n\t" \
                AOT_LOHIQ_BODY_ \
                "ldr %[x0], %[e]\n\t" \
                "cmp %[c], %[x0]\n\t" \
                "bne 1b\n\t" \
                "sub %[a1], %[a1], %[a0]\n\t" \
                "sub %[b1], %[b1], %[b0]\n\t" \
                "sub %[a3], %[a3], %[a2]\n\t" \
                "sub %[b3], %[b3], %[b2]\n\t" \
                AOT_LOHIQ_RQ_("a0", "b0", "8", "12", "16", "lsl") \
                AOT_LOHIQ_RQ_("a1", "b1", "20", "24", "28", AOT_LOHIQ_HI_##hi) \
                AOT_LOHIQ_RQ_("a2", "b2", "32", "36", "40", "lsl") \
                AOT_LOHIQ_RQ_("a3", "b3", "44", "48", "52", AOT_LOHIQ_HI_##hi) \
                : [a0] "=&r"(o0), [a1] "=&r"(o1), [a2] "=&r"(o2), [a3] "=&r"(o3), \
                  [b0] "=&r"(o4), [b1] "=&r"(o5), [b2] "=&r"(o6), [b3] "=&r"(o7), \
                  [c] "+l"(aot_c_), [w] "+l"(aot_w_), \
                  [x0] "=&l"(aot_x0_), [x1] "=&l"(aot_x1_), [w0] "=&l"(aot_w0_), [w1] "=&l"(aot_w1_) \
                : [e] "m"(aot_e_), [rq] "i"(r) \
                : "memory", "cc"); \
    } while (0)
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14 && defined(AOT_OPTIMIZE_CYCLES) && AOT_OPTIMIZE_CYCLES
#define aot_lohi_2x4_x16q aot_asmc_lohi_2x4_x16q
#else
#define aot_lohi_2x4_x16q aot_c_lohi_2x4_x16q
#endif

/* lohi_2x4_x10 and lohi_2x4_x10q (aot.kernel.intrinsics_multi; emitted by cycles builds for reductions of
   a multiple of 10 steps): the loops above with 10 steps per iteration. The asm form is the fewest-cycles
   loop of aot_asmc_lohi_2x4_x16q (single LDRs at positive offsets, both pointers 8 bytes behind the
   iteration's words, the last step's first loads pre-indexed with writeback), where gcc's loop around
   the single steps reloaded its counter and pointers from the stack (kws_int8's first convolution on
   NUCLEO-L4R5ZI: 3,472,941 estimated cycles where that loop gave 3,511,598). */
#define AOT_LOHIQ_BODY10_ \
    AOT_LOHIQ_STEP_("8", "12") AOT_LOHIQ_STEP_("16", "20") AOT_LOHIQ_STEP_("24", "28") \
    AOT_LOHIQ_STEP_("32", "36") AOT_LOHIQ_STEP_("40", "44") AOT_LOHIQ_STEP_("48", "52") \
    AOT_LOHIQ_STEP_("56", "60") AOT_LOHIQ_STEP_("64", "68") AOT_LOHIQ_STEP_("72", "76") \
    AOT_LOHIQ_LAST_("80")
#define AOT_LOHI10_ASM_(tail, cp, cw, wp, ww, n, r) \
    do { \
        const int32_t *aot_c_ = (const int32_t *)((uintptr_t)((cp) + (cw)) - 8u), *aot_w_ = (wp) + (ww); \
        const int32_t *aot_e_ = (const int32_t *)((uintptr_t)((cp) + (cw) + 20 * (n)) - 8u); \
        register int32_t aot_x0_ __asm__("r0"), aot_x1_ __asm__("r1"), aot_w0_ __asm__("r2"), \
            aot_w1_ __asm__("r3"); \
        __asm__(AOT_LOHIQ_BIASES_ \
                "1:\n\t" \
                AOT_LOHIQ_BODY10_ \
                "ldr %[x0], %[e]\n\t" \
                "cmp %[c], %[x0]\n\t" \
                "bne 1b" tail \
                : [a0] "=&r"(aot_o0_), [a1] "=&r"(aot_o1_), [a2] "=&r"(aot_o2_), [a3] "=&r"(aot_o3_), \
                  [b0] "=&r"(aot_o4_), [b1] "=&r"(aot_o5_), [b2] "=&r"(aot_o6_), [b3] "=&r"(aot_o7_), \
                  [c] "+l"(aot_c_), [w] "+l"(aot_w_), \
                  [x0] "=&l"(aot_x0_), [x1] "=&l"(aot_x1_), [w0] "=&l"(aot_w0_), [w1] "=&l"(aot_w1_) \
                : [e] "m"(aot_e_), [rq] "i"(r) \
                : "memory", "cc"); \
    } while (0)
#define AOT_LOHI10_OUT_(o0, o1, o2, o3, o4, o5, o6, o7) \
    (o0) = aot_o0_; (o1) = aot_o1_; (o2) = aot_o2_; (o3) = aot_o3_; \
    (o4) = aot_o4_; (o5) = aot_o5_; (o6) = aot_o6_; (o7) = aot_o7_
#define aot_asmc_lohi_2x4_x10(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    do { \
        int32_t aot_o0_, aot_o1_, aot_o2_, aot_o3_, aot_o4_, aot_o5_, aot_o6_, aot_o7_; \
        AOT_LOHI10_ASM_("", cp, cw, wp, ww, n, 1); \
        AOT_LOHI10_OUT_(o0, o1, o2, o3, o4, o5, o6, o7); \
    } while (0)
#define aot_asmc_lohi_2x4_x10q(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi) \
    do { \
        int32_t aot_o0_, aot_o1_, aot_o2_, aot_o3_, aot_o4_, aot_o5_, aot_o6_, aot_o7_; \
        AOT_LOHI10_ASM_("\n\t" \
                        "sub %[a1], %[a1], %[a0]\n\t" \
                        "sub %[b1], %[b1], %[b0]\n\t" \
                        "sub %[a3], %[a3], %[a2]\n\t" \
                        "sub %[b3], %[b3], %[b2]\n\t" \
                        AOT_LOHIQ_RQ_("a0", "b0", "8", "12", "16", "lsl") \
                        AOT_LOHIQ_RQ_("a1", "b1", "20", "24", "28", AOT_LOHIQ_HI_##hi) \
                        AOT_LOHIQ_RQ_("a2", "b2", "32", "36", "40", "lsl") \
                        AOT_LOHIQ_RQ_("a3", "b3", "44", "48", "52", AOT_LOHIQ_HI_##hi), cp, cw, wp, ww, n, r); \
        AOT_LOHI10_OUT_(o0, o1, o2, o3, o4, o5, o6, o7); \
    } while (0)
#define aot_c_lohi_2x4_x10(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n) \
    AOT_C_LOHI_LOOP_(10, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n)
#define aot_c_lohi_2x4_x10q(o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi) \
    AOT_C_LOHIQ_(aot_lohi_2x4_x10, 20, o0, o1, o2, o3, o4, o5, o6, o7, cp, cw, wp, ww, n, r, hi)
#if AOT_DSP_ASM_ && AOT_ASM_REGS >= 14
#define aot_lohi_2x4_x10 aot_asmc_lohi_2x4_x10
#define aot_lohi_2x4_x10q aot_asmc_lohi_2x4_x10q
#else
#define aot_lohi_2x4_x10 aot_c_lohi_2x4_x10
#define aot_lohi_2x4_x10q aot_c_lohi_2x4_x10q
#endif

/* a and b to the two adjacent words at p (aot.kernel.intrinsics.store_pair): with gcc on Thumb-2 one
   STRD (an asm whose memory operand is the 8 bytes, "Uv": base register and offset within +-1020, a
   multiple of 4; the may_alias type keeps later int32 reads of them ordered after it), where gcc
   stored a column fill's values with two STRs; for fewest cycles (AOT_OPTIMIZE_CYCLES, Cortex-M3/M4) the
   two STRs, one cycle each where STRD takes three */
#if defined(__GNUC__) && !defined(__clang__) && defined(__thumb2__) && \
    !(defined(AOT_OPTIMIZE_CYCLES) && AOT_OPTIMIZE_CYCLES && AOT_DSP_ASM_)
typedef int64_t __attribute__((may_alias)) aot_i64_alias_t;
static inline int32_t aot_store_pair(int32_t *p, int32_t a, int32_t b) {
    __asm__("strd %1, %2, %0" : "=Uv"(*(aot_i64_alias_t *)p) : "r"(a), "r"(b));
    return 0;
}
#elif defined(__GNUC__) && !defined(__clang__) && defined(__thumb2__)
static inline int32_t aot_store_pair(int32_t *p, int32_t a, int32_t b) {
    __asm__("str %1, %0" : "=m"(p[0]) : "r"(a));
    __asm__("str %1, %0" : "=m"(p[1]) : "r"(b));
    return 0;
}
#else
static inline int32_t aot_store_pair(int32_t *p, int32_t a, int32_t b) {
    p[0] = a;
    p[1] = b;
    return 0;
}
#endif

#endif /* AOT_INTRINSICS_H */
