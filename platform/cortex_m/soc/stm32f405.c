/*
 * STM32F405 (netduinoplus2): the reset clock (16 MHz HSI) is kept; USART1 on PA9 (TX) / PA10 (RX), AF7.
 * RCC 0x40023800: AHB1ENR +0x30 (bit 0 GPIOA), APB2ENR +0x44 (bit 4 USART1).
 * GPIOA 0x40020000: MODER +0x00 (PA9, PA10 = alternate function), AFRH +0x24 (PA9, PA10 = AF7).
 */
#include "aot_platform_cortex_m.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(addr))

void aot_board_init(void) {
    AOT_REG(0x40023830u) |= 1u << 0;                                     /* GPIOA clock */
    AOT_REG(0x40023844u) |= 1u << 4;                                     /* USART1 clock */
    AOT_REG(0x40020000u) = (AOT_REG(0x40020000u) & ~(15u << 18)) | (10u << 18); /* PA9, PA10 AF */
    AOT_REG(0x40020024u) = (AOT_REG(0x40020024u) & ~(255u << 4)) | (0x77u << 4);  /* AF7 */
    aot_console_init();
}
