/*
 * nRF52840 (nRF52840 DK): the CPU always runs at 64 MHz; the 64 MHz crystal oscillator
 * (HFXO) is started for an accurate UART clock, and the flash instruction cache is enabled.
 * CLOCK 0x40000000: TASKS_HFCLKSTART +0x000, EVENTS_HFCLKSTARTED +0x100.
 * NVMC 0x4001E000: ICACHECNF +0x540 (bit 0 CACHEEN).
 * The console is UARTE0 on the DK's virtual COM port pins (P0.06 TX, P0.08 RX).
 */
#include "aot_platform_cortex_m.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(addr))

void aot_board_init(void) {
    AOT_REG(0x40000100u) = 0u;
    AOT_REG(0x40000000u) = 1u;
    while (AOT_REG(0x40000100u) == 0u) {
    }
    AOT_REG(0x4001E540u) |= 1u;
    aot_console_init();
}
