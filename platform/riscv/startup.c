/*
 * RV32 startup for microaot board projects, in C with one naked entry (no assembly file).
 *
 * - _start (section .text.aot_start, placed first in flash by the generated linker script: the
 *   address the machine's reset vector or boot ROM jumps to) jumps to its link address (a core
 *   that boots from an alias of the flash continues in the flash), sets the global pointer and the
 *   stack pointer (linker symbol __stack_top, the top of the RAM region), points mtvec at the
 *   trap handler, turns the vector unit on (mstatus.VS) when built for V, and calls aot_reset.
 * - aot_reset copies .data from its load address in flash, zeroes .bss, runs aot_board_init()
 *   (the console UART), calls main() and ends with aot_platform_exit(): "AOT_EXIT <rc>" on the
 *   console, then the machine's exit device on emulated boards (AOT_EXIT_SIFIVE_TEST: QEMU
 *   virt's test finisher; AOT_EXIT_SEMIHOSTING: the semihosting exit call, QEMU run with
 *   -semihosting) or a wfi loop on hardware. No heap: nothing here or in main allocates.
 * - A trap (illegal instruction, access fault, misaligned access, ...) runs aot_trap, which
 *   prints "AOT_FAULT mcause=<n>" and exits with code AOT_FAULT_EXIT when defined (emulated
 *   boards), so that a faulting model ends a QEMU run at once; on hardware it spins.
 *
 * The .aot_pool sections (planned workspace pools) are NOLOAD and are not zeroed: the generated
 * code writes every planned buffer before reading it.
 */
#include <stdint.h>

#include "aot_platform_riscv.h"
#include "aot_runtime.h"

/* Linker script symbols (see aot/board/project/templates/linker_riscv.ld.j2). */
extern uint32_t __data_load_start;
extern uint32_t __data_start;
extern uint32_t __data_end;
extern uint32_t __bss_start;
extern uint32_t __bss_end;

extern int main(void);

void _start(void) __attribute__((naked, section(".text.aot_start"), used));
void aot_reset(void) __attribute__((noreturn, used));
void aot_trap(void) __attribute__((interrupt("machine"), aligned(4), used));

#if defined(__riscv_vector)
#define AOT_MSTATUS_ON "0x200" /* VS = Initial */
#else
#define AOT_MSTATUS_ON "0"
#endif

void _start(void) {
    __asm__ volatile(
        ".option push\n\t"
        ".option norelax\n\t"
        /* continue at the link address (GD32VF103 boots from an alias of its flash at 0) */
        "lui t0, %hi(1f)\n\t"
        "addi t0, t0, %lo(1f)\n\t"
        "jr t0\n"
        "1:\n\t"
        "la gp, __global_pointer$\n\t"
        ".option pop\n\t"
        "la sp, __stack_top\n\t"
        "la t0, aot_trap\n\t"
        "csrw mtvec, t0\n\t"
        "li t0, " AOT_MSTATUS_ON "\n\t"
        "csrs mstatus, t0\n\t"
        "j aot_reset\n\t");
}

void aot_reset(void) {
    const uint32_t *src = &__data_load_start;
    uint32_t *dst = &__data_start;
    int rc;

    while (dst < &__data_end) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start; dst < &__bss_end; ++dst) {
        *dst = 0u;
    }
    aot_board_init();
    rc = main();
    aot_platform_exit(rc);
}

void aot_platform_exit(int rc) {
    aot_platform_log_exit(rc);
    aot_platform_halt(rc);
}

#if defined(AOT_EXIT_SEMIHOSTING)
/* The semihosting call: slli/ebreak/srai, uncompressed, in this order (QEMU checks the three), at
   the start of a naked function aligned to 16 bytes (the three never straddle a page). a0: the
   operation, a1: its parameter block; a0 returns the result. */
static uint32_t aot_semihosting_call(uint32_t op, volatile uint32_t *block)
    __attribute__((naked, noinline, aligned(16), used));
static uint32_t aot_semihosting_call(uint32_t op, volatile uint32_t *block) {
    (void)op;
    (void)block;
    __asm__ volatile(
        ".option push\n\t"
        ".option norvc\n\t"
        "slli zero, zero, 0x1f\n\t"
        "ebreak\n\t"
        "srai zero, zero, 7\n\t"
        ".option pop\n\t"
        "ret\n\t");
}

static void aot_semihosting_exit(uint32_t code) {
    /* SYS_EXIT_EXTENDED (0x20): { ADP_Stopped_ApplicationExit, code } -> QEMU exits with code */
    static volatile uint32_t block[2];

    block[0] = 0x20026u;
    block[1] = code;
    (void)aot_semihosting_call(0x20u, block);
}
#endif

void aot_platform_halt(int rc) {
    aot_console_flush();
#if defined(AOT_EXIT_SIFIVE_TEST)
    /* QEMU's sifive_test finisher: 0x5555 passes (exit code 0), (code << 16) | 0x3333 fails */
    *(volatile uint32_t *)(uintptr_t)(AOT_EXIT_SIFIVE_TEST) =
        rc == 0 ? 0x5555u : (((uint32_t)rc & 0xFFFFu) << 16) | 0x3333u;
#elif defined(AOT_EXIT_SEMIHOSTING)
    aot_semihosting_exit((uint32_t)rc);
#else
    (void)rc;
#endif
    for (;;) {
        __asm__ volatile("wfi");
    }
}

#define AOT_STR_(x) #x
#define AOT_STR(x) AOT_STR_(x)

void aot_trap(void) {
#if defined(AOT_FAULT_EXIT)
    static const char digits[] = "0123456789abcdef";
    char text[12];
    uint32_t cause;
    int i;

    __asm__ volatile("csrr %0, mcause" : "=r"(cause));
    for (i = 0; i < 8; ++i) {
        text[2 + i] = digits[(cause >> (28 - 4 * i)) & 0xFu];
    }
    text[0] = '0';
    text[1] = 'x';
    text[10] = '\n';
    text[11] = '\0';
    aot_platform_log("\nAOT_FAULT mcause=");
    aot_platform_log(text);
    aot_platform_log("AOT_EXIT " AOT_STR(AOT_FAULT_EXIT) "\n");
    aot_platform_halt(AOT_FAULT_EXIT);
#else
    for (;;) {
    }
#endif
}
