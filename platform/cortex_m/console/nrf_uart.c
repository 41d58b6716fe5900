/*
 * Console on a Nordic nRF51 UART (no EasyDMA), 8N1 (receive: aot_console_rx_init, below).
 * TASKS_STARTTX +0x008, EVENTS_TXDRDY +0x11C, ENABLE +0x500 (4), PSELTXD +0x50C, TXD +0x51C,
 * BAUDRATE +0x524. The TX pin number is AOT_CONSOLE_TX_PIN (port 0); the pin is driven high
 * as an output before the UART takes it.
 */
#include "aot_platform_cortex_m.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_STARTTX AOT_UART(0x008u)
#define AOT_UART_TXDRDY AOT_UART(0x11Cu)
#define AOT_UART_ENABLE AOT_UART(0x500u)
#define AOT_UART_PSELTXD AOT_UART(0x50Cu)
#define AOT_UART_TXD AOT_UART(0x51Cu)
#define AOT_UART_BAUDRATE AOT_UART(0x524u)
#define AOT_GPIO_OUTSET (*(volatile uint32_t *)0x50000508u)
#define AOT_GPIO_DIRSET (*(volatile uint32_t *)0x50000518u)

#if AOT_CONSOLE_BAUD == 115200
#define AOT_UART_BAUD_VALUE 0x01D7E000u
#elif AOT_CONSOLE_BAUD == 9600
#define AOT_UART_BAUD_VALUE 0x00275000u
#elif AOT_CONSOLE_BAUD == 921600
#define AOT_UART_BAUD_VALUE 0x0EBED000u
#elif AOT_CONSOLE_BAUD == 1000000
#define AOT_UART_BAUD_VALUE 0x10000000u
#else
#error "nrf_uart console: baud must be 9600, 115200, 921600 or 1000000"
#endif

static void aot_console_putc(char c) {
    AOT_UART_TXDRDY = 0u;
    AOT_UART_TXD = (uint32_t)(uint8_t)c;
    while (AOT_UART_TXDRDY == 0u) {
    }
}

void aot_console_init(void) {
    AOT_GPIO_OUTSET = 1u << (AOT_CONSOLE_TX_PIN);
    AOT_GPIO_DIRSET = 1u << (AOT_CONSOLE_TX_PIN);
    AOT_UART_PSELTXD = AOT_CONSOLE_TX_PIN;
    AOT_UART_BAUDRATE = AOT_UART_BAUD_VALUE;
    AOT_UART_ENABLE = 4u;
    AOT_UART_STARTTX = 1u;
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
}

/* Receive (the validation firmware): TASKS_STARTRX +0x000, EVENTS_RXDRDY +0x108, PSELRXD +0x514,
   RXD +0x518; the RX pin is AOT_CONSOLE_RX_PIN (port 0). The event is cleared before RXD is read
   (reading RXD lets the next byte of the receive FIFO in). */
#define AOT_UART_STARTRX AOT_UART(0x000u)
#define AOT_UART_RXDRDY AOT_UART(0x108u)
#define AOT_UART_PSELRXD AOT_UART(0x514u)
#define AOT_UART_RXD AOT_UART(0x518u)

void aot_console_rx_init(void) {
#if defined(AOT_CONSOLE_RX_PIN)
    AOT_UART_PSELRXD = AOT_CONSOLE_RX_PIN;
#endif
    AOT_UART_RXDRDY = 0u;
    AOT_UART_STARTRX = 1u;
}

int aot_console_read(void) {
    if (AOT_UART_RXDRDY == 0u) {
        return -1;
    }
    AOT_UART_RXDRDY = 0u;
    return (int)(AOT_UART_RXD & 0xFFu);
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        aot_console_putc((char)bytes[i]);
    }
}
