/*
 * Console on an NS16550A UART (QEMU virt's UART0 at 0x10000000; 8-bit registers, stride 1).
 * Registers: THR/DLL +0, IER/DLM +1, FCR +2, LCR +3, LSR +5 (bit 5: THR empty, bit 6: idle).
 */
#include "aot_platform_riscv.h"

#define AOT_UART(off) (*(volatile uint8_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_THR AOT_UART(0x0u)
#define AOT_UART_DLL AOT_UART(0x0u)
#define AOT_UART_IER AOT_UART(0x1u)
#define AOT_UART_DLM AOT_UART(0x1u)
#define AOT_UART_FCR AOT_UART(0x2u)
#define AOT_UART_LCR AOT_UART(0x3u)
#define AOT_UART_LSR AOT_UART(0x5u)

static void aot_console_putc(char c) {
    while ((AOT_UART_LSR & 0x20u) == 0u) {
    }
    AOT_UART_THR = (uint8_t)c;
}

void aot_console_init(void) {
    uint32_t divisor = (AOT_CONSOLE_CLOCK_HZ) / (16u * (AOT_CONSOLE_BAUD));

    AOT_UART_IER = 0u;
    AOT_UART_LCR = 0x80u; /* DLAB */
    AOT_UART_DLL = (uint8_t)(divisor & 0xFFu);
    AOT_UART_DLM = (uint8_t)(divisor >> 8);
    AOT_UART_LCR = 0x03u; /* 8N1 */
    AOT_UART_FCR = 0x07u; /* FIFOs on and cleared */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_UART_LSR & 0x40u) == 0u) {
    }
}
