/*
 * The platform interface every microaot board project has, whatever its architecture (beyond the
 * hooks in aot_runtime.h): the interval timer, the arena's high-water mark, the board's
 * initialisation and the console UART. aot_platform_cortex_m.h and aot_platform_riscv.h include it
 * and say what each function counts on their cores, so that main.c is one.
 */
#ifndef AOT_PLATFORM_BOARD_H
#define AOT_PLATFORM_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "aot_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reset and start the interval timer. */
void aot_timer_start(void);

/* Stop the timer; return the elapsed interval as QEMU instructions (the figure to report under
 * QEMU; see the architecture's header for what it counts on hardware). */
uint64_t aot_timer_stop_instructions(void);

/* Stop the timer; return the elapsed CPU cycles on hardware. */
uint64_t aot_timer_stop_cycles(void);

/* The raw counter value of the interval measured by the last stop. */
uint64_t aot_timer_last_ticks(void);

/* Highest arena use (bytes, headers included) of aot_platform_allocate so far; 0 when
 * AOT_PLATFORM_ARENA_BYTES is 0. */
size_t aot_platform_arena_high_water(void);

/* Clocks, pins and console of the board (soc/<name>.c, or a weak function when the board needs
 * nothing beyond its reset state). Called by the startup code before main. */
void aot_board_init(void);

/* Console UART driver (console/<driver>.c): init once, then blocking writes. */
void aot_console_init(void);
void aot_console_write(const char *text, size_t length);
/* Wait until every written byte has left the UART. */
void aot_console_flush(void);

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

/* Print "AOT_EXIT <rc>" and stop (the architecture's header says how). */
void aot_platform_exit(int rc) __attribute__((noreturn));

/* The line aot_platform_exit prints, "AOT_EXIT <rc>\n", through aot_platform_log. One small buffer
 * written from its end: this frame is part of the worst-case stack (a fault handler's exit calls
 * it), so it stays a few words. */
static inline void aot_platform_log_exit(int rc) {
    char line[16];
    uint32_t value = rc < 0 ? (uint32_t)0 - (uint32_t)rc : (uint32_t)rc;
    int at = (int)sizeof(line) - 1;

    line[at] = '\0';
    line[--at] = '\n';
    do {
        line[--at] = (char)('0' + (int)(value % 10u));
        value /= 10u;
    } while (value != 0u);
    if (rc < 0) {
        line[--at] = '-';
    }
    aot_platform_log("AOT_EXIT ");
    aot_platform_log(&line[at]);
}

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_BOARD_H */
