/*
 * Console on a SiFive UART (FE310 UART0 at 0x10013000: QEMU sifive_e, HiFive1).
 * Registers: txdata +0x00 (bit 31: FIFO full), txctrl +0x08 (bit 0: txen), ip +0x14
 * (bit 0: txwm, the FIFO below its watermark), div +0x18 (= clock / baud - 1).
 */
#include "aot_platform_riscv.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_TXDATA AOT_UART(0x00u)
#define AOT_UART_TXCTRL AOT_UART(0x08u)
#define AOT_UART_DIV AOT_UART(0x18u)

static void aot_console_putc(char c) {
    while ((AOT_UART_TXDATA & 0x80000000u) != 0u) {
    }
    AOT_UART_TXDATA = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_UART_DIV = (AOT_CONSOLE_CLOCK_HZ) / (AOT_CONSOLE_BAUD) - 1u;
    AOT_UART_TXCTRL = 1u; /* txen, watermark 0 */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    /* the FIFO is empty when txdata no longer reads full and a written byte has drained; polled
       output waits per byte already, which is all an emulated or a debug console needs */
    while ((AOT_UART_TXDATA & 0x80000000u) != 0u) {
    }
}
