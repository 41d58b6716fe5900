/*
 * Cortex-M startup for microaot board projects, in C (no assembly file).
 *
 * - The vector table (section .isr_vector, placed first in flash by the generated linker
 *   script, after RP2040's boot2) holds the initial stack pointer (linker symbol __stack_top)
 *   and the 15 system exception handlers. No device interrupts are used, so none are listed.
 * - Reset_Handler copies .data from its load address in flash, zeroes .bss, enables the FPU
 *   (CP10/CP11 full access in CPACR) when built for hard float (__ARM_FP), sets VTOR on
 *   ARMv7-M/ARMv8-M, runs aot_board_init() (clocks, pins and the console UART: see
 *   soc/<name>.c, selected by the board file), calls main() and ends with aot_platform_exit().
 * - Console builds (the default) link no newlib syscall: aot_platform_exit prints
 *   "AOT_EXIT <rc>" on the UART; on an emulated board (AOT_EXIT_RESET) it then requests a
 *   system reset, which ends QEMU (run with -no-reboot); on hardware it sleeps for ever.
 * - Semihosting builds (AOT_IO_SEMIHOSTING, `--io semihosting`) call newlib rdimon's
 *   initialise_monitor_handles() first and exit(rc) last: the semihosting exit call hands
 *   main's return value to QEMU as its exit code (a real board needs a debugger attached).
 * - Every other handler is a weak alias of Default_Handler, an endless loop. When
 *   AOT_FAULT_EXIT is defined (the generator does so for emulated boards), HardFault (where
 *   MemManage, BusFault and UsageFault escalate by default) instead prints
 *   "AOT_FAULT HardFault" and exits with code AOT_FAULT_EXIT, so a faulting model ends a
 *   QEMU run at once instead of spinning until a timeout.
 *
 * The .aot_pool sections (planned workspace pools) are NOLOAD and are not zeroed: the
 * generated code writes every planned buffer before reading it.
 */
#include <stdint.h>

#include "aot_platform_cortex_m.h"
#include "aot_runtime.h"

#if defined(AOT_IO_SEMIHOSTING)
#include <stdlib.h>
extern void initialise_monitor_handles(void);
#endif

/* Linker script symbols (see aot/board/project/templates/linker.ld.j2). */
extern uint32_t __stack_top;
extern uint32_t __data_load_start;
extern uint32_t __data_start;
extern uint32_t __data_end;
extern uint32_t __bss_start;
extern uint32_t __bss_end;
extern uint32_t __isr_vector_start;

extern int main(void);

void Reset_Handler(void);
void Default_Handler(void);
void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
#if defined(AOT_FAULT_EXIT)
void HardFault_Handler(void);
#else
void HardFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
#endif
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SecureFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void DebugMon_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));

typedef union {
    void (*handler)(void);
    void *stack_top;
} aot_vector_t;

/* Entries 7..10 and 13 are reserved on ARMv7-M; MemManage/BusFault/UsageFault/
 * SecureFault/DebugMon are reserved on ARMv6-M and ignored there. */
__attribute__((section(".isr_vector"), used)) const aot_vector_t aot_vector_table[16] = {
    {.stack_top = &__stack_top},
    {.handler = Reset_Handler},
    {.handler = NMI_Handler},
    {.handler = HardFault_Handler},
    {.handler = MemManage_Handler},
    {.handler = BusFault_Handler},
    {.handler = UsageFault_Handler},
    {.handler = SecureFault_Handler},
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = SVC_Handler},
    {.handler = DebugMon_Handler},
    {.handler = 0},
    {.handler = PendSV_Handler},
    {.handler = SysTick_Handler},
};

#define AOT_SCB_VTOR (*(volatile uint32_t *)0xE000ED08u)
#define AOT_SCB_AIRCR (*(volatile uint32_t *)0xE000ED0Cu)
#define AOT_SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define AOT_SCB_AIRCR_SYSRESETREQ (0x05FA0000u | (1u << 2))

void Reset_Handler(void) {
    const uint32_t *src = &__data_load_start;
    uint32_t *dst = &__data_start;
    int rc;

    while (dst < &__data_end) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start; dst < &__bss_end; ++dst) {
        *dst = 0u;
    }
#if defined(__ARM_ARCH) && (__ARM_ARCH >= 7)
    AOT_SCB_VTOR = (uint32_t)(uintptr_t)&__isr_vector_start;
#endif
#if defined(__ARM_FP)
    /* CP10 and CP11 full access; without it the first FP instruction faults (and QEMU's
     * hard-float images hang in Default_Handler). */
    AOT_SCB_CPACR |= (0xFu << 20);
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#if defined(AOT_IO_SEMIHOSTING)
    initialise_monitor_handles();
#endif
    aot_board_init();
    rc = main();
    aot_platform_exit(rc);
}

void aot_platform_exit(int rc) {
#if defined(AOT_IO_SEMIHOSTING)
    exit(rc);
#else
    aot_platform_log_exit(rc);
    aot_platform_halt();
#endif
}

#if !defined(AOT_IO_SEMIHOSTING)
void aot_platform_halt(void) {
    aot_console_flush();
#if defined(AOT_EXIT_RESET)
    /* QEMU runs with -no-reboot: a reset request ends it. */
    __asm__ volatile("dsb" ::: "memory");
    AOT_SCB_AIRCR = AOT_SCB_AIRCR_SYSRESETREQ;
    __asm__ volatile("dsb" ::: "memory");
#endif
    for (;;) {
        __asm__ volatile("wfi");
    }
}
#endif

void Default_Handler(void) {
    for (;;) {
    }
}

#if defined(AOT_FAULT_EXIT)
#define AOT_STR_(x) #x
#define AOT_STR(x) AOT_STR_(x)
void HardFault_Handler(void) {
#if defined(AOT_IO_SEMIHOSTING)
    aot_platform_log("\nAOT_FAULT HardFault\n");
    aot_platform_exit(AOT_FAULT_EXIT);
#else
    /* the exit line is a constant: no line buffer under this handler, whose frames count in every
       image's worst-case stack */
    aot_platform_log("\nAOT_FAULT HardFault\nAOT_EXIT " AOT_STR(AOT_FAULT_EXIT) "\n");
    aot_platform_halt();
#endif
}
#endif
