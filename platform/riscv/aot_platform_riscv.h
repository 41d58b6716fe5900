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

#include "aot_platform_board.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aot_platform_exit (aot_platform_board.h) ends through the emulated machine's exit device (QEMU
 * ends), else sleeps. Flush the console, then end the run (emulated boards) or sleep for ever. */
void aot_platform_halt(int rc) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* AOT_PLATFORM_RISCV_H */
