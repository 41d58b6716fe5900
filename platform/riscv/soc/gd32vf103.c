/*
 * GD32VF103 (Longan Nano): runs on the 8 MHz internal oscillator (IRC8M, the reset clock); the
 * console is USART0 with TX on PA9 (alternate function push-pull, 50 MHz).
 * RCU at 0x40021000: APB2EN +0x18 (bit 0 AFEN, bit 2 PAEN, bit 14 USART0EN). GPIOA at
 * 0x40010800: CTL1 +0x04, pins 8..15, four bits each (PA9: bits 4..7 = 0xB).
 */
#include "aot_platform_riscv.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define AOT_RCU_APB2EN AOT_REG(0x40021018u)
#define AOT_GPIOA_CTL1 AOT_REG(0x40010804u)

void aot_board_init(void) {
    AOT_RCU_APB2EN |= (1u << 0) | (1u << 2) | (1u << 14);
    AOT_GPIOA_CTL1 = (AOT_GPIOA_CTL1 & ~(0xFu << 4)) | (0xBu << 4);
    aot_console_init();
}
