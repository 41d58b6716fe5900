/*
 * Console on the ESP32-C3's UART0 (0x60000000), as the ROM bootloader configured it (115200 baud
 * from the 40 MHz XTAL clock). Registers: FIFO +0x00 (write: one byte into the TX FIFO),
 * STATUS +0x1C (bits 16..25: bytes in the TX FIFO, 128 deep).
 */
#include "aot_platform_riscv.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_FIFO AOT_UART(0x00u)
#define AOT_UART_STATUS AOT_UART(0x1Cu)
#define AOT_UART_TXFIFO_CNT ((AOT_UART_STATUS >> 16) & 0x3FFu)

static void aot_console_putc(char c) {
    while (AOT_UART_TXFIFO_CNT >= 126u) {
    }
    AOT_UART_FIFO = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while (AOT_UART_TXFIFO_CNT != 0u) {
    }
}
