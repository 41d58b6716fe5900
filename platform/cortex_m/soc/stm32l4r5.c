/*
 * STM32L4R5 (NUCLEO-L4R5ZI): 120 MHz from the PLL, console on LPUART1 (PG7 TX / PG8 RX,
 * AF8: the ST-LINK virtual COM port).
 *
 * Clock (RM0432 "Dynamic voltage scaling", "Clock configuration"): PWR clock on, range 1
 * boost mode (PWR_CR5.R1MODE = 0) for more than 80 MHz, 5 flash wait states, PLL from the
 * 4 MHz MSI reset clock: /M 1, *N 60 = 240 MHz VCO, /R 2 = 120 MHz. The switch to the PLL
 * goes through AHB /2 for the 1 us the reference manual asks, then AHB /1.
 * PG2..PG15 are powered by VDDIO2, which must be declared valid (PWR_CR2.IOSV) before
 * port G works. LPUART1 is clocked from PCLK1 (120 MHz).
 *
 * Memory system (RM0432 "Flash access control register", "ART accelerator"): with the 5 wait
 * states set, the prefetch buffer (PRFTEN) and the ART's instruction and data caches (ICEN,
 * DCEN, on at reset) are turned on, after a reset of both caches, as ST's firmware runs it.
 */
#include "aot_platform_cortex_m.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_CR AOT_REG(0x40021000u)
#define RCC_CFGR AOT_REG(0x40021008u)
#define RCC_PLLCFGR AOT_REG(0x4002100Cu)
#define RCC_AHB2ENR AOT_REG(0x4002104Cu)
#define RCC_APB1ENR1 AOT_REG(0x40021058u)
#define RCC_APB1ENR2 AOT_REG(0x4002105Cu)
#define RCC_CCIPR AOT_REG(0x40021088u)
#define PWR_CR2 AOT_REG(0x40007004u)
#define PWR_CR5 AOT_REG(0x40007080u)
#define FLASH_ACR AOT_REG(0x40022000u)
#define FLASH_ACR_PRFTEN (1u << 8)
#define FLASH_ACR_ICEN (1u << 9)
#define FLASH_ACR_DCEN (1u << 10)
#define FLASH_ACR_ICRST (1u << 11)
#define FLASH_ACR_DCRST (1u << 12)
#define GPIOG_MODER AOT_REG(0x48001800u)
#define GPIOG_AFRL AOT_REG(0x48001820u)
#define GPIOG_AFRH AOT_REG(0x48001824u)

static void aot_delay(uint32_t n) {
    while (n-- != 0u) {
        __asm__ volatile("nop");
    }
}

static void aot_clock_120mhz(void) {
    RCC_APB1ENR1 |= 1u << 28; /* PWREN */
    (void)RCC_APB1ENR1;
    PWR_CR5 &= ~(1u << 8); /* R1MODE = 0: range 1 boost */
    FLASH_ACR = (FLASH_ACR & ~15u) | 5u;
    while ((FLASH_ACR & 15u) != 5u) {
    }
    /* caches off, reset, then prefetch and both caches on */
    FLASH_ACR &= ~(FLASH_ACR_ICEN | FLASH_ACR_DCEN);
    FLASH_ACR |= FLASH_ACR_ICRST | FLASH_ACR_DCRST;
    FLASH_ACR &= ~(FLASH_ACR_ICRST | FLASH_ACR_DCRST);
    FLASH_ACR |= FLASH_ACR_PRFTEN | FLASH_ACR_ICEN | FLASH_ACR_DCEN;
    RCC_PLLCFGR = (1u << 0)      /* PLLSRC = MSI */
                | (0u << 4)      /* PLLM = /1 */
                | (60u << 8)     /* PLLN = 60 */
                | (0u << 25)     /* PLLR = /2 */
                | (1u << 24);    /* PLLREN */
    RCC_CR |= 1u << 24; /* PLLON */
    while ((RCC_CR & (1u << 25)) == 0u) {
    }
    RCC_CFGR = (RCC_CFGR & ~(15u << 4)) | (8u << 4); /* AHB /2 */
    RCC_CFGR = (RCC_CFGR & ~3u) | 3u;                /* SYSCLK = PLL */
    while ((RCC_CFGR & (3u << 2)) != (3u << 2)) {
    }
    aot_delay(100u);
    RCC_CFGR &= ~(15u << 4); /* AHB /1 */
}

void aot_board_init(void) {
    aot_clock_120mhz();
    PWR_CR2 |= 1u << 9;       /* IOSV: VDDIO2 valid (port G) */
    RCC_AHB2ENR |= 1u << 6;   /* GPIOG */
    RCC_APB1ENR2 |= 1u << 0;  /* LPUART1 */
    RCC_CCIPR &= ~(3u << 10); /* LPUART1 clock = PCLK1 */
    (void)RCC_APB1ENR2;
    GPIOG_MODER = (GPIOG_MODER & ~((3u << 14) | (3u << 16))) | (2u << 14) | (2u << 16);
    GPIOG_AFRL = (GPIOG_AFRL & ~(15u << 28)) | (8u << 28); /* PG7 AF8 */
    GPIOG_AFRH = (GPIOG_AFRH & ~15u) | 8u;                 /* PG8 AF8 */
    aot_console_init();
}
