/*
 * FE310-G002 (HiFive1 Rev B) clocks: hfclk from the 16 MHz crystal oscillator (HFXOSC) with the
 * PLL bypassed, so that the console's divisor (UART0 at 0x10013000, 115200 baud) holds; the
 * board's pins 16/17 are UART0's by the IOF registers of GPIO0.
 * PRCI at 0x10008000: hfxosccfg +0x04 (bit 30 enable, bit 31 ready), pllcfg +0x08 (bit 16
 * pllsel, bit 17 pllrefsel, bit 18 pllbypass). GPIO0 at 0x10012000: iof_en +0x38, iof_sel +0x3C.
 */
#include "aot_platform_riscv.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define AOT_PRCI_HFXOSCCFG AOT_REG(0x10008004u)
#define AOT_PRCI_PLLCFG AOT_REG(0x10008008u)
#define AOT_GPIO_IOF_EN AOT_REG(0x10012038u)
#define AOT_GPIO_IOF_SEL AOT_REG(0x1001203Cu)
#define AOT_UART0_PINS ((1u << 16) | (1u << 17))

void aot_board_init(void) {
    AOT_PRCI_HFXOSCCFG |= 1u << 30;
    while ((AOT_PRCI_HFXOSCCFG & (1u << 31)) == 0u) {
    }
    AOT_PRCI_PLLCFG |= (1u << 17) | (1u << 18); /* reference: HFXOSC, PLL bypassed */
    AOT_PRCI_PLLCFG |= 1u << 16;                /* hfclk from the PLL output (= HFXOSC) */
    AOT_GPIO_IOF_SEL &= ~AOT_UART0_PINS;
    AOT_GPIO_IOF_EN |= AOT_UART0_PINS;
    aot_console_init();
}
