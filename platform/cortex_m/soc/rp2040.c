/*
 * RP2040 (Raspberry Pi Pico): 12 MHz crystal oscillator (XOSC) -> PLL_SYS 125 MHz -> clk_sys;
 * clk_ref from XOSC; clk_peri from clk_sys; console on UART0 (GP0 TX, GP1 RX).
 *
 * Register facts (RP2040 datasheet, chapter 2): every block has atomic aliases at +0x2000
 * (set bits) and +0x3000 (clear bits).
 *   RESETS 0x4000C000: RESET +0x0, RESET_DONE +0x8; bits IO_BANK0 5, PADS_BANK0 8,
 *     PLL_SYS 12, UART0 22.
 *   XOSC 0x40024000: CTRL +0x0 (FREQ_RANGE 1-15 MHz = 0xAA0, ENABLE = 0xFAB << 12),
 *     STATUS +0x4 (bit 31 STABLE), STARTUP +0xC (delay in 256-cycle units: 47 ~ 1 ms).
 *   PLL_SYS 0x40028000: CS +0x0 (REFDIV, bit 31 LOCK), PWR +0x4 (PD 0, VCOPD 5,
 *     POSTDIVPD 3), FBDIV_INT +0x8, PRIM +0xC (POSTDIV1 bits 18:16, POSTDIV2 bits 14:12).
 *     12 MHz / 1 * 125 = 1500 MHz VCO, / 6 / 2 = 125 MHz.
 *   CLOCKS 0x40008000: CLK_REF_CTRL +0x30 (SRC 2 = XOSC), CLK_REF_SELECTED +0x38,
 *     CLK_SYS_CTRL +0x3C (SRC bit 0: 1 = aux; AUXSRC bits 7:5: 0 = PLL_SYS),
 *     CLK_SYS_SELECTED +0x44, CLK_PERI_CTRL +0x48 (bit 11 ENABLE, AUXSRC 0 = clk_sys),
 *     CLK_SYS_RESUS_CTRL +0x78.
 *   IO_BANK0 0x40014000: GPIOn_CTRL at +0x4 + 8n (FUNCSEL 2 = UART).
 */
#include "aot_platform_cortex_m.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(addr))
#define AOT_SET(addr) AOT_REG((addr) + 0x2000u)
#define AOT_CLR(addr) AOT_REG((addr) + 0x3000u)

#define RESETS_RESET 0x4000C000u
#define RESETS_DONE 0x4000C008u
#define XOSC_CTRL 0x40024000u
#define XOSC_STATUS 0x40024004u
#define XOSC_STARTUP 0x4002400Cu
#define PLL_CS 0x40028000u
#define PLL_PWR 0x40028004u
#define PLL_FBDIV 0x40028008u
#define PLL_PRIM 0x4002800Cu
#define CLK_REF_CTRL 0x40008030u
#define CLK_REF_SELECTED 0x40008038u
#define CLK_SYS_CTRL 0x4000803Cu
#define CLK_SYS_SELECTED 0x40008044u
#define CLK_PERI_CTRL 0x40008048u
#define CLK_SYS_RESUS_CTRL 0x40008078u
#define IO_GPIO0_CTRL 0x40014004u
#define IO_GPIO1_CTRL 0x4001400Cu

#define BIT_IO_BANK0 (1u << 5)
#define BIT_PADS_BANK0 (1u << 8)
#define BIT_PLL_SYS (1u << 12)
#define BIT_UART0 (1u << 22)

static void aot_unreset(uint32_t bits) {
    AOT_CLR(RESETS_RESET) = bits;
    while ((AOT_REG(RESETS_DONE) & bits) != bits) {
    }
}

static void aot_clock_125mhz(void) {
    AOT_REG(CLK_SYS_RESUS_CTRL) = 0u;
    /* crystal oscillator */
    AOT_REG(XOSC_CTRL) = 0xAA0u;
    AOT_REG(XOSC_STARTUP) = 47u;
    AOT_SET(XOSC_CTRL) = 0xFABu << 12;
    while ((AOT_REG(XOSC_STATUS) & (1u << 31)) == 0u) {
    }
    /* clk_sys back to clk_ref (glitchless), clk_ref to the crystal */
    AOT_CLR(CLK_SYS_CTRL) = 1u;
    while (AOT_REG(CLK_SYS_SELECTED) != 1u) {
    }
    AOT_REG(CLK_REF_CTRL) = 2u;
    while (AOT_REG(CLK_REF_SELECTED) != (1u << 2)) {
    }
    /* PLL_SYS: 12 MHz * 125 = 1500 MHz, / 6 / 2 = 125 MHz */
    AOT_SET(RESETS_RESET) = BIT_PLL_SYS;
    aot_unreset(BIT_PLL_SYS);
    AOT_REG(PLL_CS) = 1u;
    AOT_REG(PLL_FBDIV) = 125u;
    AOT_CLR(PLL_PWR) = (1u << 0) | (1u << 5);
    while ((AOT_REG(PLL_CS) & (1u << 31)) == 0u) {
    }
    AOT_REG(PLL_PRIM) = (6u << 16) | (2u << 12);
    AOT_CLR(PLL_PWR) = 1u << 3;
    /* clk_sys from the PLL through the aux mux; clk_peri from clk_sys */
    AOT_REG(CLK_SYS_CTRL) = 0u; /* AUXSRC = PLL_SYS while SRC still selects clk_ref */
    AOT_SET(CLK_SYS_CTRL) = 1u;
    while (AOT_REG(CLK_SYS_SELECTED) != (1u << 1)) {
    }
    AOT_REG(CLK_PERI_CTRL) = 1u << 11;
}

void aot_board_init(void) {
    aot_clock_125mhz();
    aot_unreset(BIT_IO_BANK0 | BIT_PADS_BANK0 | BIT_UART0);
    AOT_REG(IO_GPIO0_CTRL) = 2u; /* GP0 = UART0 TX */
    AOT_REG(IO_GPIO1_CTRL) = 2u; /* GP1 = UART0 RX */
    aot_console_init();
}
