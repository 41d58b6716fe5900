/*
 * Console on an Arm CMSDK APB UART (MPS2/MPS3 FPGA images; QEMU connects UART0 to -serial).
 * Registers: DATA +0x00, STATE +0x04 (bit 0: TX buffer full), CTRL +0x08 (bit 0: TX enable),
 * BAUDDIV +0x10 (= UART clock / baud, at least 16).
 */
#include "aot_platform_cortex_m.h"

#define AOT_UART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UART_DATA AOT_UART(0x00u)
#define AOT_UART_STATE AOT_UART(0x04u)
#define AOT_UART_CTRL AOT_UART(0x08u)
#define AOT_UART_BAUDDIV AOT_UART(0x10u)

static void aot_console_putc(char c) {
    while ((AOT_UART_STATE & 1u) != 0u) {
    }
    AOT_UART_DATA = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_UART_BAUDDIV = (AOT_CONSOLE_CLOCK_HZ) / (AOT_CONSOLE_BAUD);
    AOT_UART_CTRL = 1u; /* TX enable */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_UART_STATE & 1u) != 0u) {
    }
}

/* Receive (the validation firmware): STATE bit 1 RX buffer full, bit 3 RX overrun (write 1 to clear),
   CTRL bit 1 RX enable. */
void aot_console_rx_init(void) {
#if defined(AOT_CONSOLE_RX_IRQ_MASK)
    AOT_UART_CTRL = 3u | 8u; /* TX and RX enable, RX interrupt (for aot_console_rx_wait's WFI) */
#else
    AOT_UART_CTRL = 3u; /* TX and RX enable */
#endif
}

#if defined(AOT_CONSOLE_RX_IRQ_MASK)
/* INTSTATUS/INTCLEAR +0x0C: bit 1 RX interrupt (write 1 to clear). */
int aot_console_rx_ready(void) {
    return (AOT_UART_STATE & 2u) != 0u;
}

void aot_console_rx_irq_clear(void) {
    AOT_UART(0x0Cu) = 2u;
}
#endif

int aot_console_read(void) {
    if ((AOT_UART_STATE & 8u) != 0u) {
        AOT_UART_STATE = 8u;
    }
    if ((AOT_UART_STATE & 2u) == 0u) {
        return -1;
    }
    return (int)(AOT_UART_DATA & 0xFFu);
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        aot_console_putc((char)bytes[i]);
    }
}
