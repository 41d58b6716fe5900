/*
 * RISC-V (RV32) platform extras for microaot board projects (beyond the hooks in aot_runtime.h):
 * the same interface as the Cortex-M platform (aot_platform_cortex_m.h), so that main.c is one.
 *
 * Console: aot_platform_log() writes to the board's UART (console/<driver>.c, chosen by the board
 * file).
 *
 * Timer: the instret counter (CSR minstret/minstreth), read in machine mode. Under QEMU with
 * `-icount shift=0` it holds the exact count of retired guest instructions, so
 * aot_timer_stop_instructions() returns instructions and ticks are the same figure. On hardware
 * aot_timer_stop_cycles() reads mcycle (CPU cycles).
 */
#ifndef AOT_PLATFORM_RISCV_H
#define AOT_PLATFORM_RISCV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reset and start the interval timer. */
void aot_timer_start(void);

/* Stop the timer; return the retired instructions of the interval (minstret). */
uint64_t aot_timer_stop_instructions(void);

/* Stop the timer; return the elapsed CPU cycles (mcycle). */
uint64_t aot_timer_stop_cycles(void);

/* The counter value of the interval measured by the last stop. */
uint64_t aot_timer_last_ticks(void);

/* Highest arena use (bytes, headers included) of aot_platform_allocate so far; 0 when
 * AOT_PLATFORM_ARENA_BYTES is 0. */
size_t aot_platform_arena_high_water(void);

/* Clocks, pins and console of the board (a weak function that only initialises the console when
 * the board needs nothing else). Called by the startup code before main. */
void aot_board_init(void);

/* Console UART driver (console/<driver>.c): init once, then blocking writes. */
void aot_console_init(void);
void aot_console_write(const char *text, size_t length);
/* Wait until every written byte has left the UART. */
void aot_console_flush(void);

/* aot_console_write of the drivers that transmit one character at a time: '\n' goes out as "\r\n". */
static inline void aot_console_write_polled(void (*putc)(char), const char *text, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        if (text[i] == '\n') {
            putc('\r');
        }
        putc(text[i]);
    }
}

/* Print "AOT_EXIT <rc>" and stop: the emulated machine's exit device (QEMU ends), else sleep. */
void aot_platform_exit(int rc) __attribute__((noreturn));
/* Flush the console, then end the run (emulated boards) or sleep for ever. */
void aot_platform_halt(int rc) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_RISCV_H */
