/*
 * Cortex-M bare-metal platform hooks for microaot (console + timer + arena).
 *
 * Allocation: a static LIFO arena (runtime_c's aot_arena_t) of AOT_PLATFORM_ARENA_BYTES
 * bytes. The default is 0: no arena exists and every allocation fails with
 * AOT_ERR_ALLOCATION, as the `micro` allocation policy expects (all scratch is planned).
 *
 * Log: text written verbatim to the console UART (console/<driver>.c), or to semihosting
 * stdout (newlib rdimon's write(1, ...)) in AOT_IO_SEMIHOSTING builds.
 *
 * Timer calibration (qemu-system-arm 7.2, -icount shift=0), measured with a two-instruction
 * `subs/bne` loop of 1e3..4e8 iterations: SysTick on the processor clock advances exactly
 * once per 1e9 / clock_hz instructions: 40 on the 25 MHz MPS2 boards (an385/an386/an500),
 * 31.25 on the 32 MHz mps3-an547. 2n-instruction loops read back as exactly 2n (the call
 * overhead, ~20 instructions, is below one tick); 8e8 instructions (> 2^24 ticks) confirmed
 * the wrap counting. Resolution is one tick. tests/boards/test_boards_project.py checks this.
 * On hardware with DWT (AOT_TIMER_DWT) the same SysTick runs beside CYCCNT and only decides
 * how many times the 32-bit CYCCNT wrapped.
 */
#include "aot_platform_cortex_m.h"

#include "aot_runtime.h"

#include <string.h>
#if defined(AOT_IO_SEMIHOSTING)
#include <unistd.h>
#endif

/* Nanoseconds per SysTick tick as a reduced fraction, = 1e9 / (the emulated CPU clock);
 * under QEMU -icount shift=0 one nanosecond is one instruction. The project generator
 * defines both from the board's clock_hz; the default is the 25 MHz MPS2 clock. With a
 * denominator of 1 or a power of two no 64-bit division is linked. */
#ifndef AOT_TIMER_NS_PER_TICK_NUM
#define AOT_TIMER_NS_PER_TICK_NUM 40u
#endif
#ifndef AOT_TIMER_NS_PER_TICK_DEN
#define AOT_TIMER_NS_PER_TICK_DEN 1u
#endif

/* ---- allocation: platform/aot_platform_arena.c ------------------------------------- */

/* ---- log ------------------------------------------------------------------------------- */

#if defined(AOT_IO_SEMIHOSTING)
void aot_console_init(void) {
}

void aot_console_write(const char *text, size_t length) {
    (void)write(1, text, length);
}

void aot_console_flush(void) {
}
#endif

void aot_platform_log(const char *msg) {
    if (msg != NULL) {
        aot_console_write(msg, strlen(msg));
    }
}

/* Boards without a soc/<name>.c run on their reset clocks and only need the console. */
__attribute__((weak)) void aot_board_init(void) {
    aot_console_init();
}

/* ---- SysTick timer --------------------------------------------------------------------- */

#define AOT_SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define AOT_SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define AOT_SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define AOT_SCB_ICSR (*(volatile uint32_t *)0xE000ED04u)

#define AOT_SYST_CSR_ENABLE (1u << 0)
#define AOT_SYST_CSR_TICKINT (1u << 1)
#define AOT_SYST_CSR_CLKSOURCE (1u << 2) /* 1 = processor clock */
#define AOT_SCB_ICSR_PENDSTSET (1u << 26)
#define AOT_SCB_ICSR_PENDSTCLR (1u << 25)
#define AOT_SYST_RELOAD 0x00FFFFFFu

static volatile uint32_t aot_timer_wraps;
static uint64_t aot_timer_ticks;

#if defined(AOT_TIMER_DWT)
#define AOT_DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define AOT_DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define AOT_DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
#define AOT_DWT_LAR (*(volatile uint32_t *)0xE0001FB0u)
#define AOT_DEMCR_TRCENA (1u << 24)
#define AOT_DWT_CTRL_CYCCNTENA (1u << 0)

static uint32_t aot_timer_cycles_start;
#endif

void SysTick_Handler(void) {
    aot_timer_wraps = aot_timer_wraps + 1u;
}

#if defined(AOT_CONSOLE_RX_IRQ_MASK)
#define AOT_NVIC_ISER (*(volatile uint32_t *)(0xE000E100u + 4u * (AOT_CONSOLE_RX_IRQ_WORD)))
#define AOT_NVIC_ICER (*(volatile uint32_t *)(0xE000E180u + 4u * (AOT_CONSOLE_RX_IRQ_WORD)))
#define AOT_NVIC_ICPR (*(volatile uint32_t *)(0xE000E280u + 4u * (AOT_CONSOLE_RX_IRQ_WORD)))
#define AOT_SYST_CSR_COUNTFLAG (1u << 16)

/* WFI wakes on a pending interrupt that is enabled in the NVIC even while PRIMASK masks it, so the
   UART's line is enabled only around the WFI and cleared before PRIMASK is lifted: no handler is
   ever entered for it. A byte that arrives after the check pends the line, and WFI returns at once. */
int aot_console_rx_wait(void) {
    uint32_t csr;
    __asm volatile("cpsid i" ::: "memory");
    aot_console_rx_irq_clear();
    AOT_NVIC_ICPR = AOT_CONSOLE_RX_IRQ_MASK;
    AOT_NVIC_ISER = AOT_CONSOLE_RX_IRQ_MASK;
    if (!aot_console_rx_ready()) {
        __asm volatile("wfi" ::: "memory");
    }
    AOT_NVIC_ICER = AOT_CONSOLE_RX_IRQ_MASK;
    csr = AOT_SYST_CSR;
    if ((csr & AOT_SYST_CSR_ENABLE) == 0u) { /* stopped by aot_timer_stop_*: the wake-up tick again */
        AOT_SYST_RVR = AOT_SYST_RELOAD;
        AOT_SYST_CVR = 0u;
        AOT_SYST_CSR = AOT_SYST_CSR_CLKSOURCE | AOT_SYST_CSR_TICKINT | AOT_SYST_CSR_ENABLE;
    }
    __asm volatile("cpsie i" ::: "memory"); /* a pending SysTick runs its handler (counts a wrap) */
    return (csr & AOT_SYST_CSR_COUNTFLAG) != 0u ? 1 : 0;
}
#endif

void aot_timer_start(void) {
#if defined(AOT_TIMER_DWT)
    AOT_DEMCR |= AOT_DEMCR_TRCENA;
    AOT_DWT_LAR = 0xC5ACCE55u; /* unlock (Cortex-M7); ignored where there is no lock */
    AOT_DWT_CTRL |= AOT_DWT_CTRL_CYCCNTENA;
#endif
    AOT_SYST_CSR = 0u;
    AOT_SYST_RVR = AOT_SYST_RELOAD;
    AOT_SYST_CVR = 0u; /* any write clears the counter; the first tick loads the reload */
    AOT_SCB_ICSR = AOT_SCB_ICSR_PENDSTCLR;
    aot_timer_wraps = 0u;
    AOT_SYST_CSR = AOT_SYST_CSR_CLKSOURCE | AOT_SYST_CSR_TICKINT | AOT_SYST_CSR_ENABLE;
#if defined(AOT_TIMER_DWT)
    aot_timer_cycles_start = AOT_DWT_CYCCNT;
#endif
}

uint64_t aot_timer_stop_instructions(void) {
    uint32_t value;
    uint32_t wraps;
    uint64_t ticks;

    __asm__ volatile("cpsid i" ::: "memory");
    AOT_SYST_CSR = AOT_SYST_CSR_CLKSOURCE; /* stop counting */
    value = AOT_SYST_CVR;
    wraps = aot_timer_wraps;
    if ((AOT_SCB_ICSR & AOT_SCB_ICSR_PENDSTSET) != 0u) {
        /* The counter reached 0 but the handler has not run yet: count that wrap here. */
        wraps += 1u;
        AOT_SCB_ICSR = AOT_SCB_ICSR_PENDSTCLR;
    }
    __asm__ volatile("cpsie i" ::: "memory");

    /* After k ticks the counter holds (RELOAD + 1 - k) mod 2^24 and has wrapped k / 2^24
     * times (the wrap interrupt fires on reaching 0). */
    ticks = (uint64_t)wraps * (AOT_SYST_RELOAD + 1u) +
            ((uint64_t)(AOT_SYST_RELOAD + 1u - value) & AOT_SYST_RELOAD);
    aot_timer_ticks = ticks;
    return ticks * (uint64_t)(AOT_TIMER_NS_PER_TICK_NUM) / (uint64_t)(AOT_TIMER_NS_PER_TICK_DEN);
}

uint64_t aot_timer_stop_cycles(void) {
#if defined(AOT_TIMER_DWT)
    uint32_t cycles = AOT_DWT_CYCCNT - aot_timer_cycles_start;
    uint64_t ticks;

    (void)aot_timer_stop_instructions();
    ticks = aot_timer_ticks;
    /* CYCCNT and SysTick both count processor cycles; SysTick says how often CYCCNT wrapped. */
    return (uint64_t)cycles + (((ticks - (uint64_t)cycles + 0x80000000ull) >> 32) << 32);
#else
    (void)aot_timer_stop_instructions();
    return aot_timer_ticks;
#endif
}

uint64_t aot_timer_last_ticks(void) {
    return aot_timer_ticks;
}
