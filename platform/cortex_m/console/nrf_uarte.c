/*
 * Console on a Nordic nRF52 UARTE (EasyDMA), 8N1 (receive: aot_console_rx_init and aot_console_read, below).
 * TASKS_STARTTX +0x008, EVENTS_ENDTX +0x120, ENABLE +0x500 (8), PSEL.TXD +0x50C,
 * BAUDRATE +0x524, TXD.PTR +0x544, TXD.MAXCNT +0x548, CONFIG +0x56C. EasyDMA reads RAM
 * only, so text (often in flash) is copied to a RAM buffer first. The TX pin is
 * AOT_CONSOLE_TX_PIN on port 0 (0x50000000), driven high as an output first.
 */
#include "aot_platform_cortex_m.h"

#define AOT_UARTE(off) (*(volatile uint32_t *)((uintptr_t)(AOT_CONSOLE_BASE) + (off)))
#define AOT_UARTE_STARTTX AOT_UARTE(0x008u)
#define AOT_UARTE_ENDTX AOT_UARTE(0x120u)
#define AOT_UARTE_ENABLE AOT_UARTE(0x500u)
#define AOT_UARTE_PSEL_TXD AOT_UARTE(0x50Cu)
#define AOT_UARTE_BAUDRATE AOT_UARTE(0x524u)
#define AOT_UARTE_TXD_PTR AOT_UARTE(0x544u)
#define AOT_UARTE_TXD_MAXCNT AOT_UARTE(0x548u)
#define AOT_UARTE_CONFIG AOT_UARTE(0x56Cu)
#define AOT_GPIO_OUTSET (*(volatile uint32_t *)0x50000508u)
#define AOT_GPIO_DIRSET (*(volatile uint32_t *)0x50000518u)

#if AOT_CONSOLE_BAUD == 115200
#define AOT_UARTE_BAUD_VALUE 0x01D60000u
#elif AOT_CONSOLE_BAUD == 9600
#define AOT_UARTE_BAUD_VALUE 0x00275000u
#elif AOT_CONSOLE_BAUD == 921600
#define AOT_UARTE_BAUD_VALUE 0x0F000000u
#elif AOT_CONSOLE_BAUD == 1000000
#define AOT_UARTE_BAUD_VALUE 0x10000000u
#else
#error "nrf_uarte console: baud must be 9600, 115200, 921600 or 1000000"
#endif

static uint8_t aot_uarte_buffer[64];

static void aot_uarte_send(size_t count) {
    AOT_UARTE_ENDTX = 0u;
    AOT_UARTE_TXD_PTR = (uint32_t)(uintptr_t)aot_uarte_buffer;
    AOT_UARTE_TXD_MAXCNT = (uint32_t)count;
    AOT_UARTE_STARTTX = 1u;
    while (AOT_UARTE_ENDTX == 0u) {
    }
}

void aot_console_init(void) {
    AOT_GPIO_OUTSET = 1u << (AOT_CONSOLE_TX_PIN);
    AOT_GPIO_DIRSET = 1u << (AOT_CONSOLE_TX_PIN);
    AOT_UARTE_PSEL_TXD = AOT_CONSOLE_TX_PIN;
    AOT_UARTE_BAUDRATE = AOT_UARTE_BAUD_VALUE;
    AOT_UARTE_CONFIG = 0u;
    AOT_UARTE_ENABLE = 8u;
}

void aot_console_write(const char *text, size_t length) {
    size_t used = 0u;
    size_t i;
    for (i = 0u; i < length; ++i) {
        if (used + 2u > sizeof(aot_uarte_buffer)) {
            aot_uarte_send(used);
            used = 0u;
        }
        if (text[i] == '\n') {
            aot_uarte_buffer[used++] = (uint8_t)'\r';
        }
        aot_uarte_buffer[used++] = (uint8_t)text[i];
    }
    if (used != 0u) {
        aot_uarte_send(used);
    }
}

void aot_console_flush(void) {
}

/* Receive (the validation firmware) through EasyDMA, one byte per transfer: TASKS_STARTRX +0x000,
   EVENTS_ENDRX +0x110, PSEL.RXD +0x514, RXD.PTR +0x534, RXD.MAXCNT +0x538; the RX pin is
   AOT_CONSOLE_RX_PIN (port 0). Bytes arriving between two transfers wait in the UARTE's RX FIFO. */
#define AOT_UARTE_STARTRX AOT_UARTE(0x000u)
#define AOT_UARTE_ENDRX AOT_UARTE(0x110u)
#define AOT_UARTE_PSEL_RXD AOT_UARTE(0x514u)
#define AOT_UARTE_RXD_PTR AOT_UARTE(0x534u)
#define AOT_UARTE_RXD_MAXCNT AOT_UARTE(0x538u)

static volatile uint8_t aot_uarte_rx_byte;

static void aot_uarte_rx_start(void) {
    AOT_UARTE_ENDRX = 0u;
    AOT_UARTE_RXD_PTR = (uint32_t)(uintptr_t)&aot_uarte_rx_byte;
    AOT_UARTE_RXD_MAXCNT = 1u;
    AOT_UARTE_STARTRX = 1u;
}

void aot_console_rx_init(void) {
#if defined(AOT_CONSOLE_RX_PIN)
    AOT_UARTE_PSEL_RXD = AOT_CONSOLE_RX_PIN;
#endif
    aot_uarte_rx_start();
}

int aot_console_read(void) {
    int byte;
    if (AOT_UARTE_ENDRX == 0u) {
        return -1;
    }
    byte = (int)aot_uarte_rx_byte;
    aot_uarte_rx_start();
    return byte;
}

void aot_console_write_raw(const uint8_t *bytes, size_t length) {
    size_t i = 0u;
    while (i < length) {
        size_t n = length - i < sizeof(aot_uarte_buffer) ? length - i : sizeof(aot_uarte_buffer);
        size_t k;
        for (k = 0u; k < n; ++k) {
            aot_uarte_buffer[k] = bytes[i + k];
        }
        aot_uarte_send(n);
        i += n;
    }
}
