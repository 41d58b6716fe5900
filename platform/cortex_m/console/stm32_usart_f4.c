/*
 * Console on an STM32F1/F2/F4 USART (SR/DR/BRR/CR1 register layout), 8N1 (receive: aot_console_rx_init and aot_console_read, below).
 * SR +0x00 (bit 7 TXE, bit 6 TC), DR +0x04, BRR +0x08 (oversampling by 16: clock / baud),
 * CR1 +0x0C (bit 13 UE, bit 3 TE). The pins and the bus clock are enabled by soc/<name>.c.
 */
#include "aot_platform_cortex_m.h"

#define AOT_USART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_USART_SR AOT_USART(0x00u)
#define AOT_USART_DR AOT_USART(0x04u)
#define AOT_USART_BRR AOT_USART(0x08u)
#define AOT_USART_CR1 AOT_USART(0x0Cu)
#define AOT_USART_SR_TXE (1u << 7)
#define AOT_USART_SR_TC (1u << 6)

static void aot_console_putc(char c) {
    while ((AOT_USART_SR & AOT_USART_SR_TXE) == 0u) {
    }
    AOT_USART_DR = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_USART_BRR = ((AOT_CONSOLE_CLOCK_HZ) + (AOT_CONSOLE_BAUD) / 2u) / (AOT_CONSOLE_BAUD);
    AOT_USART_CR1 = (1u << 13) | (1u << 3); /* UE | TE */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_USART_SR & AOT_USART_SR_TC) == 0u) {
    }
}

/* Receive (the validation firmware): CR1 bit 2 RE, SR bit 5 RXNE (an overrun, bit 3, is cleared by
   reading SR then DR). The RX pin is set up by soc/<name>.c. */
void aot_console_rx_init(void) {
#if defined(AOT_CONSOLE_RX_IRQ_MASK)
    AOT_USART_CR1 = (1u << 13) | (1u << 5) | (1u << 3) | (1u << 2); /* UE | RXNEIE (aot_console_rx_wait) | TE | RE */
#else
    AOT_USART_CR1 = (1u << 13) | (1u << 3) | (1u << 2); /* UE | TE | RE */
#endif
}

#if defined(AOT_CONSOLE_RX_IRQ_MASK)
/* The interrupt follows RXNE (and an overrun): reading DR clears it, nothing else to clear. */
int aot_console_rx_ready(void) {
    return (AOT_USART_SR & ((1u << 5) | (1u << 3))) != 0u;
}

void aot_console_rx_irq_clear(void) {
}
#endif

int aot_console_read(void) {
    uint32_t sr = AOT_USART_SR;
    if ((sr & ((1u << 5) | (1u << 3))) == 0u) {
        return -1;
    }
    return (sr & (1u << 5)) != 0u ? (int)(AOT_USART_DR & 0xFFu) : ((void)AOT_USART_DR, -1);
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        aot_console_putc((char)bytes[i]);
    }
}
