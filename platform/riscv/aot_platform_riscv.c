/*
 * RV32 bare-metal platform hooks for microaot (console + timer + arena).
 *
 * Allocation: a static LIFO arena (runtime_c's aot_arena_t) of AOT_PLATFORM_ARENA_BYTES bytes.
 * The default is 0: no arena exists and every allocation fails with AOT_ERR_ALLOCATION, as the
 * `micro` allocation policy expects (all scratch is planned).
 *
 * Log: text written verbatim to the console UART (console/<driver>.c).
 *
 * Timer: minstret (retired instructions) and mcycle, 64-bit through their high halves. QEMU
 * (qemu-system-riscv32 7.2) returns the virtual clock for both when run with -icount: with
 * shift=0 that is one count per guest instruction, so the interval is the instruction count of
 * the code between start and stop (tests/boards/test_riscv_boards.py checks a loop of known
 * length).
 */
#include "aot_platform_riscv.h"

#include "aot_runtime.h"

#include <string.h>

/* ---- allocation: platform/aot_platform_arena.c ------------------------------------- */

/* ---- log ------------------------------------------------------------------------------- */

void aot_platform_log(const char *msg) {
    if (msg != NULL) {
        aot_console_write(msg, strlen(msg));
    }
}

/* Boards without clock or pin set-up run on their reset clocks and only need the console. */
__attribute__((weak)) void aot_board_init(void) {
    aot_console_init();
}

/* ---- instret / cycle timer ------------------------------------------------------------- */

static uint64_t aot_timer_begin;
static uint64_t aot_timer_ticks;

#define AOT_READ_COUNTER64(lo_csr, hi_csr, out)                                 \
    do {                                                                        \
        uint32_t hi_, lo_, hi2_;                                                \
        do {                                                                    \
            __asm__ volatile("csrr %0, " hi_csr : "=r"(hi_));                   \
            __asm__ volatile("csrr %0, " lo_csr : "=r"(lo_));                   \
            __asm__ volatile("csrr %0, " hi_csr : "=r"(hi2_));                  \
        } while (hi_ != hi2_);                                                  \
        (out) = ((uint64_t)hi_ << 32) | lo_;                                    \
    } while (0)

static uint64_t aot_instret(void) {
    uint64_t v;
    AOT_READ_COUNTER64("minstret", "minstreth", v);
    return v;
}

#if defined(AOT_TIMER_ESP32C3)
/* The ESP32-C3 has no mcycle: its performance counter (mpcer 0x7E0: count cycles, mpcmr 0x7E1:
   counting on, mpccr 0x7E2: the 32-bit count) stands in for it. */
static uint64_t aot_cycles(void) {
    uint32_t v;
    __asm__ volatile("csrw 0x7e0, %0\n\tcsrw 0x7e1, %0" : : "r"(1u));
    __asm__ volatile("csrr %0, 0x7e2" : "=r"(v));
    return v;
}
#else
static uint64_t aot_cycles(void) {
    uint64_t v;
    AOT_READ_COUNTER64("mcycle", "mcycleh", v);
    return v;
}
#endif

#if defined(AOT_TIMER_CYCLES)
#define AOT_COUNTER aot_cycles
#else
#define AOT_COUNTER aot_instret
#endif

void aot_timer_start(void) {
    aot_timer_begin = AOT_COUNTER();
}

uint64_t aot_timer_stop_instructions(void) {
    aot_timer_ticks = aot_instret() - aot_timer_begin;
    return aot_timer_ticks;
}

uint64_t aot_timer_stop_cycles(void) {
#if defined(AOT_TIMER_ESP32C3)
    aot_timer_ticks = (uint32_t)(aot_cycles() - aot_timer_begin);
#else
    aot_timer_ticks = aot_cycles() - aot_timer_begin;
#endif
    return aot_timer_ticks;
}

uint64_t aot_timer_last_ticks(void) {
    return aot_timer_ticks;
}
