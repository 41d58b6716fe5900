/*
 * Console on a GD32VF103 USART (USART0 at 0x40013800; the STM32F1 register layout).
 * Registers: STAT +0x00 (bit 7 TBE: data register empty, bit 6 TC: transmission complete),
 * DATA +0x04, BAUD +0x08 (= clock / baud, 12.4 fixed point), CTL0 +0x0C (bit 13 UEN, bit 3 TEN).
 */
#include "aot_platform_riscv.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_STAT AOT_UART(0x00u)
#define AOT_UART_DATA AOT_UART(0x04u)
#define AOT_UART_BAUD AOT_UART(0x08u)
#define AOT_UART_CTL0 AOT_UART(0x0Cu)

static void aot_console_putc(char c) {
    while ((AOT_UART_STAT & (1u << 7)) == 0u) {
    }
    AOT_UART_DATA = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_UART_BAUD = ((AOT_CONSOLE_CLOCK_HZ) + (AOT_CONSOLE_BAUD) / 2u) / (AOT_CONSOLE_BAUD);
    AOT_UART_CTL0 = (1u << 13) | (1u << 3);
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_UART_STAT & (1u << 6)) == 0u) {
    }
}
