/*
 * ESP32-C3: the ROM bootloader loaded this image into SRAM and left UART0 at 115200 baud (its own
 * console) and three watchdogs running, which a second-stage bootloader would stop: the RTC
 * watchdog, the main system watchdog of timer group 0 and the super watchdog. They are turned off
 * here (write-protect keys from the technical reference manual), then the console needs nothing.
 */
#include "aot_platform_riscv.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define AOT_RTC_CNTL_WDTCONFIG0 AOT_REG(0x60008090u)
#define AOT_RTC_CNTL_WDTWPROTECT AOT_REG(0x600080A8u)
#define AOT_RTC_CNTL_SWD_CONF AOT_REG(0x600080ACu)
#define AOT_RTC_CNTL_SWD_WPROTECT AOT_REG(0x600080B0u)
#define AOT_TIMG0_WDTCONFIG0 AOT_REG(0x6001F048u)
#define AOT_TIMG0_WDTWPROTECT AOT_REG(0x6001F064u)
#define AOT_WDT_KEY 0x50D83AA1u
#define AOT_SWD_KEY 0x8F1D312Au

void aot_board_init(void) {
    AOT_RTC_CNTL_WDTWPROTECT = AOT_WDT_KEY;
    AOT_RTC_CNTL_WDTCONFIG0 = 0u;
    AOT_RTC_CNTL_WDTWPROTECT = 0u;
    AOT_TIMG0_WDTWPROTECT = AOT_WDT_KEY;
    AOT_TIMG0_WDTCONFIG0 = 0u;
    AOT_TIMG0_WDTWPROTECT = 0u;
    AOT_RTC_CNTL_SWD_WPROTECT = AOT_SWD_KEY;
    AOT_RTC_CNTL_SWD_CONF |= 1u << 31; /* SWD_DISABLE */
    AOT_RTC_CNTL_SWD_WPROTECT = 0u;
    aot_console_init();
}
