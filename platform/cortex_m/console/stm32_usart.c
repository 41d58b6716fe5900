/*
 * Console on an STM32 USART or LPUART with the CR1/BRR/ISR/TDR layout (STM32F7, L4, L4+,
 * G4, H7...), 8N1 (receive: aot_console_rx_init and aot_console_read, below). CR1 +0x00 (bit 0 UE, bit 3 TE), BRR +0x0C, ISR +0x1C
 * (bit 7 TXE, bit 6 TC), TDR +0x28. BRR is clock / baud for a USART (oversampling by 16)
 * and 256 * clock / baud for an LPUART (AOT_CONSOLE_LPUART). The pins and the bus clock
 * are enabled by soc/<name>.c.
 */
#include "aot_platform_cortex_m.h"

#define AOT_USART(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_USART_CR1 AOT_USART(0x00u)
#define AOT_USART_BRR AOT_USART(0x0Cu)
#define AOT_USART_ISR AOT_USART(0x1Cu)
#define AOT_USART_TDR AOT_USART(0x28u)
#define AOT_USART_ISR_TXE (1u << 7)
#define AOT_USART_ISR_TC (1u << 6)

#if defined(AOT_CONSOLE_LPUART)
#define AOT_USART_BRR_VALUE \
    ((uint32_t)((256ull * (AOT_CONSOLE_CLOCK_HZ) + (AOT_CONSOLE_BAUD) / 2u) / (AOT_CONSOLE_BAUD)))
#else
#define AOT_USART_BRR_VALUE (((AOT_CONSOLE_CLOCK_HZ) + (AOT_CONSOLE_BAUD) / 2u) / (AOT_CONSOLE_BAUD))
#endif

static void aot_console_putc(char c) {
    while ((AOT_USART_ISR & AOT_USART_ISR_TXE) == 0u) {
    }
    AOT_USART_TDR = (uint32_t)(uint8_t)c;
}

void aot_console_init(void) {
    AOT_USART_CR1 = 0u;
    AOT_USART_BRR = AOT_USART_BRR_VALUE;
    AOT_USART_CR1 = (1u << 3) | (1u << 0); /* TE | UE */
}

void aot_console_write(const char *text, size_t length) {
    aot_console_write_polled(aot_console_putc, text, length);
}

void aot_console_flush(void) {
    while ((AOT_USART_ISR & AOT_USART_ISR_TC) == 0u) {
    }
}

/* Receive (the validation firmware): CR1 bit 2 RE, ISR bit 5 RXNE, bit 3 ORE (cleared through
   ICR +0x20 bit 3), RDR +0x24. */
#define AOT_USART_ICR AOT_USART(0x20u)
#define AOT_USART_RDR AOT_USART(0x24u)

void aot_console_rx_init(void) {
    AOT_USART_CR1 = (1u << 3) | (1u << 2) | (1u << 0); /* TE | RE | UE */
}

int aot_console_read(void) {
    uint32_t isr = AOT_USART_ISR;
    if ((isr & (1u << 3)) != 0u) {
        AOT_USART_ICR = 1u << 3;
    }
    if ((isr & (1u << 5)) == 0u) {
        return -1;
    }
    return (int)(AOT_USART_RDR & 0xFFu);
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i;
    for (i = 0u; i < length; ++i) {
        aot_console_putc((char)bytes[i]);
    }
}
