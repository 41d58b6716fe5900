/*
 * Cortex-M startup for microaot board projects, in C (no assembly file).
 *
 * - The vector table (section .isr_vector, placed first in flash by the generated linker
 *   script) holds the initial stack pointer (linker symbol __stack_top) and the 15 system
 *   exception handlers. No device interrupts are used, so none are listed.
 * - Reset_Handler copies .data from its load address in flash, zeroes .bss, enables the
 *   FPU (CP10/CP11 full access in CPACR) when built for hard float (__ARM_FP), sets VTOR on
 *   ARMv7-M/ARMv8-M, calls initialise_monitor_handles() (newlib rdimon semihosting) and
 *   main(), then exit(rc): newlib's _exit issues the semihosting exit call with main's
 *   return value, which QEMU returns as its own exit code.
 * - Every other handler is a weak alias of Default_Handler, an endless loop. When
 *   AOT_FAULT_EXIT is defined (the generator does so for emulated boards), HardFault (where
 *   MemManage, BusFault and UsageFault escalate by default) instead prints
 *   "AOT_FAULT HardFault" on semihosting stdout and exits with code AOT_FAULT_EXIT, so a
 *   faulting model ends a QEMU run at once instead of spinning until a timeout.
 *
 * The .aot_pool sections (planned workspace pools) are NOLOAD and are not zeroed: the
 * generated code writes every planned buffer before reading it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "aot_runtime.h"

/* Linker script symbols (see aot/board/project/templates/linker.ld.j2). */
extern uint32_t __stack_top;
extern uint32_t __data_load_start;
extern uint32_t __data_start;
extern uint32_t __data_end;
extern uint32_t __bss_start;
extern uint32_t __bss_end;
extern uint32_t __isr_vector_start;

extern int main(void);
extern void initialise_monitor_handles(void);

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
#define AOT_SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

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
    initialise_monitor_handles();
    rc = main();
    exit(rc);
}

void Default_Handler(void) {
    for (;;) {
    }
}

#if defined(AOT_FAULT_EXIT)
void HardFault_Handler(void) {
    aot_platform_log("\nAOT_FAULT HardFault\n");
    exit(AOT_FAULT_EXIT);
}
#endif
