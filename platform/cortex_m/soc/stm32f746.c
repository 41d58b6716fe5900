/*
 * STM32F746 (STM32F746G-DISCO): 216 MHz from the PLL, console on USART1 (PA9 TX / PB7 RX,
 * AF7: the ST-LINK virtual COM port).
 *
 * Clock (RM0385 "Entering Over-drive mode", "Relation between CPU clock frequency and
 * Flash memory read time"): PWR clock on, voltage scale 1, PLL from the 16 MHz HSI:
 * /M 8 = 2 MHz, *N 216 = 432 MHz VCO, /P 2 = 216 MHz, /Q 9 = 48 MHz; over-drive on and
 * switched, 7 flash wait states with ART and prefetch, APB1 /4 (54 MHz), APB2 /2 (108 MHz,
 * USART1's clock). The Cortex-M7's L1 instruction and data caches are invalidated and turned
 * on (Cortex-M7 TRM / PM0253 "Enabling the caches", the CMSIS SCB_EnableICache/DCache steps):
 * the image runs from flash on the AXIM interface, which only the L1 caches serve.
 */
#include "aot_platform_cortex_m.h"

#define AOT_REG(addr) (*(volatile uint32_t *)(addr))
#define RCC_CR AOT_REG(0x40023800u)
#define RCC_PLLCFGR AOT_REG(0x40023804u)
#define RCC_CFGR AOT_REG(0x40023808u)
#define RCC_AHB1ENR AOT_REG(0x40023830u)
#define RCC_APB1ENR AOT_REG(0x40023840u)
#define RCC_APB2ENR AOT_REG(0x40023844u)
#define PWR_CR1 AOT_REG(0x40007000u)
#define PWR_CSR1 AOT_REG(0x40007004u)
#define FLASH_ACR AOT_REG(0x40023C00u)
#define SCB_CCR AOT_REG(0xE000ED14u)
#define SCB_CCSIDR AOT_REG(0xE000ED80u)
#define SCB_CSSELR AOT_REG(0xE000ED84u)
#define SCB_ICIALLU AOT_REG(0xE000EF50u)
#define SCB_DCISW AOT_REG(0xE000EF60u)
#define SCB_CCR_DC (1u << 16)
#define SCB_CCR_IC (1u << 17)
#define GPIOA_MODER AOT_REG(0x40020000u)
#define GPIOA_AFRH AOT_REG(0x40020024u)
#define GPIOB_MODER AOT_REG(0x40020400u)
#define GPIOB_AFRL AOT_REG(0x40020420u)

static void aot_clock_216mhz(void) {
    RCC_APB1ENR |= 1u << 28; /* PWREN */
    (void)RCC_APB1ENR;
    PWR_CR1 |= 3u << 14; /* VOS scale 1 */
    RCC_PLLCFGR = 8u            /* PLLM */
                | (216u << 6)   /* PLLN */
                | (0u << 16)    /* PLLP = /2 */
                | (0u << 22)    /* PLLSRC = HSI */
                | (9u << 24);   /* PLLQ */
    RCC_CR |= 1u << 24; /* PLLON */
    PWR_CR1 |= 1u << 16; /* ODEN */
    while ((PWR_CSR1 & (1u << 16)) == 0u) {
    }
    PWR_CR1 |= 1u << 17; /* ODSWEN */
    while ((PWR_CSR1 & (1u << 17)) == 0u) {
    }
    while ((RCC_CR & (1u << 25)) == 0u) {
    }
    FLASH_ACR = 7u | (1u << 8) | (1u << 9); /* 7 WS, prefetch, ART */
    while ((FLASH_ACR & 15u) != 7u) {
    }
    RCC_CFGR = (RCC_CFGR & ~((7u << 10) | (7u << 13) | (15u << 4)))
             | (5u << 10)   /* APB1 /4 */
             | (4u << 13);  /* APB2 /2 */
    RCC_CFGR = (RCC_CFGR & ~3u) | 2u; /* SYSCLK = PLL */
    while ((RCC_CFGR & (3u << 2)) != (2u << 2)) {
    }
}

static void aot_caches_on(void) {
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    SCB_ICIALLU = 0u;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    SCB_CCR |= SCB_CCR_IC;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    SCB_CSSELR = 0u; /* level 1 data cache */
    __asm__ volatile("dsb" ::: "memory");
    uint32_t ccsidr = SCB_CCSIDR;
    uint32_t sets = (ccsidr >> 13) & 0x7FFFu;
    do {
        uint32_t ways = (ccsidr >> 3) & 0x3FFu;
        do {
            SCB_DCISW = (sets << 5) | (ways << 30); /* 32-byte lines, 4 ways */
        } while (ways-- != 0u);
    } while (sets-- != 0u);
    __asm__ volatile("dsb" ::: "memory");
    SCB_CCR |= SCB_CCR_DC;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

void aot_board_init(void) {
    aot_clock_216mhz();
    aot_caches_on();
    RCC_AHB1ENR |= (1u << 0) | (1u << 1); /* GPIOA, GPIOB */
    RCC_APB2ENR |= 1u << 4;               /* USART1 */
    (void)RCC_APB2ENR;
    GPIOA_MODER = (GPIOA_MODER & ~(3u << 18)) | (2u << 18);  /* PA9 AF */
    GPIOA_AFRH = (GPIOA_AFRH & ~(15u << 4)) | (7u << 4);     /* AF7 */
    GPIOB_MODER = (GPIOB_MODER & ~(3u << 14)) | (2u << 14);  /* PB7 AF */
    GPIOB_AFRL = (GPIOB_AFRL & ~(15u << 28)) | (7u << 28);   /* AF7 */
    aot_console_init();
}
