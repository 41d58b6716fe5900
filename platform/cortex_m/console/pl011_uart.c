/*
 * Console on an Arm PL011 UART (RP2040 UART0/UART1), 8N1 with FIFOs (receive: aot_console_rx_init and aot_console_read, below).
 * DR +0x00, FR +0x18 (bit 5 TXFF, bit 3 BUSY), IBRD +0x24, FBRD +0x28, LCR_H +0x2C,
 * CR +0x30 (bit 0 UARTEN, bit 8 TXE). The divisor is clock / (16 * baud) in 1/64ths,
 * rounded; LCR_H is written after the divisors (it latches them).
 */
#include "aot_platform_cortex_m.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_DR AOT_UART(0x00u)
#define AOT_UART_FR AOT_UART(0x18u)
#define AOT_UART_IBRD AOT_UART(0x24u)
#define AOT_UART_FBRD AOT_UART(0x28u)
#define AOT_UART_LCR_H AOT_UART(0x2Cu)
#define AOT_UART_CR AOT_UART(0x30u)
#define AOT_UART_DIV64 ((8u * (AOT_CONSOLE_CLOCK_HZ) / (AOT_CONSOLE_BAUD) + 1u) / 2u)

static void aot_console_putc(char c) {
    while ((AOT_UART_FR & (1u << 5)) != 0u) {
    }
    AOT_UART_DR = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_UART_CR = 0u;
    AOT_UART_IBRD = AOT_UART_DIV64 >> 6;
    AOT_UART_FBRD = AOT_UART_DIV64 & 63u;
    AOT_UART_LCR_H = (3u << 5) | (1u << 4); /* 8 bits, FIFOs on */
    AOT_UART_CR = (1u << 8) | (1u << 0);    /* TXE | UARTEN */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_UART_FR & (1u << 3)) != 0u) {
    }
}

/* Receive (the validation firmware): CR bit 9 RXE, FR bit 4 RXFE (receive FIFO empty), DR bits 0-7
   the byte (bits 8-11 its error flags). The RX pin is set up by soc/<name>.c. */
void aot_console_rx_init(void) {
    AOT_UART_CR = (1u << 9) | (1u << 8) | (1u << 0); /* RXE | TXE | UARTEN */
}

int aot_console_read(void) {
    if ((AOT_UART_FR & (1u << 4)) != 0u) {
        return -1;
    }
    return (int)(AOT_UART_DR & 0xFFu);
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        aot_console_putc((char)bytes[i]);
    }
}
