/*
 * Cortex-M platform extras for microaot board projects (beyond the hooks in aot_runtime.h).
 *
 * Console: aot_platform_log() writes to the board's UART (console/<driver>.c, chosen by the
 * board file) or, in `--io semihosting` builds (AOT_IO_SEMIHOSTING), to semihosting stdout.
 *
 * Timer: one interval at a time, started by aot_timer_start() and read by aot_timer_stop().
 *   - QEMU (AOT_TIMER_QEMU, emulated boards): SysTick on the processor clock, reload
 *     0xFFFFFF, wraps counted in SysTick_Handler. QEMU does not model DWT; with
 *     `-icount shift=0` every guest instruction advances virtual time by 1 ns and SysTick
 *     ticks at the board's emulated clock, so
 *         instructions = ticks * AOT_TIMER_NS_PER_TICK_NUM / AOT_TIMER_NS_PER_TICK_DEN
 *     (= ticks * 1e9 / clock_hz: 40 per tick at 25 MHz), to one tick.
 *   - Hardware with a DWT cycle counter (Cortex-M3/M4/M7/M33/M55, AOT_TIMER_DWT): CPU cycles
 *     from DWT CYCCNT; SysTick runs alongside and resolves the 2^32 wraps of CYCCNT.
 *   - Hardware without DWT CYCCNT (Cortex-M0/M0+): SysTick on the processor clock, one tick
 *     per CPU cycle.
 */
#ifndef AOT_PLATFORM_CORTEX_M_H
#define AOT_PLATFORM_CORTEX_M_H

#include "aot_platform_board.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Receive, for the validation firmware (main.c of `aot project --validate`): enable the receiver
 * (after aot_console_init); then aot_console_read() returns the next received byte (0..255), or
 * -1 when none is waiting (it never blocks); aot_console_write_raw writes bytes as they are (no
 * "\n" -> "\r\n"). */
void aot_console_rx_init(void);
int aot_console_read(void);
void aot_console_write_raw(const uint8_t *bytes, size_t length);
#if defined(AOT_CONSOLE_RX_IRQ_MASK)
/* Boards whose console names its receive interrupt (board JSON console.rx_irqs): sleep (WFI, with
 * interrupts masked: no handler runs for the UART) until a byte may have arrived, or SysTick
 * wrapped (it runs, with its interrupt, while the console waits). Returns 1 when SysTick wrapped
 * since the previous call, so a caller counts quiet time in wraps of 2^24 processor cycles.
 * The driver provides aot_console_rx_ready (a byte waits: 1) and aot_console_rx_irq_clear
 * (clears the UART's own receive-interrupt flag), and enables the interrupt in aot_console_rx_init. */
int aot_console_rx_wait(void);
int aot_console_rx_ready(void);
void aot_console_rx_irq_clear(void);
#endif

/* aot_platform_exit (aot_platform_board.h) prints "AOT_EXIT <rc>" (console builds) or exits
 * through semihosting. Console builds: flush the console: flush the console, then end the run (a reset request on emulated boards) or sleep */
void aot_platform_halt(void) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_CORTEX_M_H */
