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

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reset and start the interval timer. */
void aot_timer_start(void);

/* Stop the timer; return the elapsed interval as QEMU instructions (see above). Under QEMU
 * this is the figure to report; on hardware use aot_timer_stop_cycles(). */
uint64_t aot_timer_stop_instructions(void);

/* Stop the timer; return the elapsed CPU cycles (hardware) or SysTick ticks (QEMU). */
uint64_t aot_timer_stop_cycles(void);

/* Raw SysTick ticks of the interval measured by the last stop. */
uint64_t aot_timer_last_ticks(void);

/* Highest arena use (bytes, headers included) of aot_platform_allocate so far; 0 when
 * AOT_PLATFORM_ARENA_BYTES is 0. */
size_t aot_platform_arena_high_water(void);

/* Clocks, pins and console of the board (soc/<name>.c; a weak no-op when the board has none
 * beyond the reset state). Called by Reset_Handler before main. */
void aot_board_init(void);

/* Console UART driver (console/<driver>.c): init once, then blocking writes. */
void aot_console_init(void);
void aot_console_write(const char *text, size_t length);
/* Wait until every written byte has left the UART. */
void aot_console_flush(void);
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

/* aot_console_write of the drivers that transmit one character at a time (putc blocks until
 * the transmitter takes it): '\n' goes out as "\r\n". */
static inline void aot_console_write_polled(void (*putc)(char), const char *text, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        if (text[i] == '\n') {
            putc('\r');
        }
        putc(text[i]);
    }
}

/* Print "AOT_EXIT <rc>" and stop (console builds), or exit through semihosting. */
void aot_platform_exit(int rc) __attribute__((noreturn));
/* console builds: flush the console, then end the run (a reset request on emulated boards) or sleep */
void aot_platform_halt(void) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_CORTEX_M_H */
