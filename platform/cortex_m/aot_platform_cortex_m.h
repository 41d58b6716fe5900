/*
 * Cortex-M platform extras for microaot board projects (beyond the hooks in aot_runtime.h).
 *
 * Timer: SysTick on the processor clock, reload 0xFFFFFF, wraps counted in SysTick_Handler,
 * so intervals of any length are measured. On real silicon a tick is one CPU cycle. Under
 * QEMU with `-icount shift=0` every guest instruction advances virtual time by 1 ns and
 * SysTick ticks at the board's emulated clock, so
 *     instructions = ticks * AOT_TIMER_NS_PER_TICK_NUM / AOT_TIMER_NS_PER_TICK_DEN
 * (= ticks * 1e9 / clock_hz: 40 per tick at 25 MHz) with a resolution of one tick.
 * See the calibration notes in aot_platform_cortex_m.c.
 */
#ifndef AOT_PLATFORM_CORTEX_M_H
#define AOT_PLATFORM_CORTEX_M_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reset and start the SysTick counter (reload 0xFFFFFF, processor clock, wrap interrupt). */
void aot_timer_start(void);

/* Stop the counter; return the elapsed interval as QEMU instructions (see above). */
uint64_t aot_timer_stop_instructions(void);

/* Raw SysTick ticks of the interval measured by the last aot_timer_stop_instructions(). */
uint64_t aot_timer_last_ticks(void);

/* Highest arena use (bytes, headers included) of aot_platform_allocate so far; 0 when
 * AOT_PLATFORM_ARENA_BYTES is 0. */
size_t aot_platform_arena_high_water(void);

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_CORTEX_M_H */
