/*
 * RP2040 second-stage bootloader (boot2) for a Winbond W25Q080 (the Raspberry Pi Pico's
 * flash), written for microaot. The boot ROM copies the first 256 bytes of flash to SRAM,
 * checks the CRC32 of the first 252 (polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no
 * reflection, no final XOR; stored little-endian in bytes 252..255) and jumps here with
 * lr = 0. The code is position-independent and uses the stack only.
 *
 * 1. QSPI pads: SCLK 8 mA with fast slew, Schmitt triggers of SD0..SD3 off.
 * 2. SSI off, clock divider 4, RX sample delay 1.
 * 3. Standard SPI, 8-bit frames: read status register 2 (0x35); unless it is exactly
 *    0x02 (QE, quad enable), write enable (0x06) and write SR1 = 0, SR2 = 0x02 (0x01),
 *    then poll status register 1 (0x05) until BUSY clears.
 * 4. Quad I/O, 32-bit frames, EEPROM read mode: one "Fast Read Quad I/O" (0xEB) with
 *    address 0 and mode bits 0xA0 (continuous read), so later reads need no command.
 * 5. XIP: SPI_CTRLR0 sends address + mode bits 0xA0 (XIP_CMD) in quad, no instruction,
 *    4 wait cycles. XIP cache on.
 * 6. lr == 0 (boot ROM): VTOR = 0x10000100, load MSP and jump to the reset handler of the
 *    vector table there; otherwise return to the caller.
 *
 * Register facts: RP2040 datasheet sections 2.19 (pads), 4.10 (SSI), 2.6.3 (XIP);
 * W25Q080 datasheet (status registers, 0xEB).
 */
    .syntax unified
    .cpu cortex-m0plus
    .thumb
    .section .text
    .global aot_boot2_entry
    .type aot_boot2_entry, %function
    .thumb_func

    .equ PADS_QSPI,     0x40020000
    .equ SSI,           0x18000000
    .equ XIP_CTRL,      0x14000000
    .equ SSI_CTRLR0,    0x00
    .equ SSI_CTRLR1,    0x04
    .equ SSI_SSIENR,    0x08
    .equ SSI_BAUDR,     0x14
    .equ SSI_SR,        0x28
    .equ SSI_DR0,       0x60
    .equ SSI_RX_SAMPLE_DLY, 0xF0
    .equ SSI_SPI_CTRLR0, 0xF4
    /* CTRLR0: DFS_32 bits 20:16, SPI_FRF bits 22:21 (2 = quad), TMOD bits 9:8 (3 = EEPROM read) */
    .equ CTRLR0_SPI_8BIT, (7 << 16)
    .equ CTRLR0_QUAD_READ, (2 << 21) | (31 << 16) | (3 << 8)
    /* SPI_CTRLR0: TRANS_TYPE 1:0, ADDR_L 5:2, INST_L 9:8, WAIT_CYCLES 15:11, XIP_CMD 31:24 */
    .equ SPI_CTRLR0_CMD_SERIAL, (1 << 0) | (8 << 2) | (2 << 8) | (4 << 11)
    .equ SPI_CTRLR0_XIP, (2 << 0) | (8 << 2) | (0 << 8) | (4 << 11) | (0xA0 << 24)

aot_boot2_entry:
    push {lr}

    ldr r3, =PADS_QSPI
    movs r0, #((2 << 4) | 1)        /* SCLK: 8 mA drive, fast slew */
    str r0, [r3, #0x04]
    ldr r0, [r3, #0x08]             /* SD0 pad */
    movs r1, #2                     /* SCHMITT */
    bics r0, r1
    str r0, [r3, #0x08]
    str r0, [r3, #0x0C]
    str r0, [r3, #0x10]
    str r0, [r3, #0x14]

    ldr r3, =SSI
    movs r1, #0
    str r1, [r3, #SSI_SSIENR]
    movs r1, #4
    str r1, [r3, #SSI_BAUDR]
    movs r1, #1
    movs r2, #SSI_RX_SAMPLE_DLY
    str r1, [r3, r2]

    ldr r1, =CTRLR0_SPI_8BIT
    str r1, [r3, #SSI_CTRLR0]
    movs r1, #1
    str r1, [r3, #SSI_SSIENR]

    movs r0, #0x35                  /* read status register 2 */
    bl read_status
    movs r2, #0x02                  /* QE */
    cmp r0, r2
    beq quad_enabled

    movs r1, #0x06                  /* write enable */
    str r1, [r3, #SSI_DR0]
    bl wait_idle
    ldr r1, [r3, #SSI_DR0]
    movs r1, #0x01                  /* write status: SR1 = 0, SR2 = QE */
    str r1, [r3, #SSI_DR0]
    movs r0, #0
    str r0, [r3, #SSI_DR0]
    str r2, [r3, #SSI_DR0]
    bl wait_idle
    ldr r1, [r3, #SSI_DR0]
    ldr r1, [r3, #SSI_DR0]
    ldr r1, [r3, #SSI_DR0]
busy:
    movs r0, #0x05                  /* read status register 1 until BUSY clears */
    bl read_status
    movs r1, #1
    tst r0, r1
    bne busy

quad_enabled:
    movs r1, #0
    str r1, [r3, #SSI_SSIENR]
    ldr r1, =CTRLR0_QUAD_READ
    str r1, [r3, #SSI_CTRLR0]
    movs r1, #0                     /* one 32-bit frame */
    str r1, [r3, #SSI_CTRLR1]
    ldr r1, =SPI_CTRLR0_CMD_SERIAL
    movs r2, #SSI_SPI_CTRLR0
    str r1, [r3, r2]
    movs r1, #1
    str r1, [r3, #SSI_SSIENR]
    movs r1, #0xEB                  /* fast read quad I/O */
    str r1, [r3, #SSI_DR0]
    movs r1, #0xA0                  /* address 0, mode bits 0xA0 */
    str r1, [r3, #SSI_DR0]
    bl wait_idle

    movs r1, #0
    str r1, [r3, #SSI_SSIENR]
    ldr r1, =SPI_CTRLR0_XIP
    movs r2, #SSI_SPI_CTRLR0
    str r1, [r3, r2]
    movs r1, #1
    str r1, [r3, #SSI_SSIENR]

    ldr r3, =XIP_CTRL
    movs r1, #3                     /* EN | ERR_BADWRITE */
    str r1, [r3, #0]

    pop {r0}
    cmp r0, #0
    beq enter_flash
    bx r0
enter_flash:
    ldr r0, =0x10000100
    ldr r1, =0xE000ED08             /* VTOR */
    str r0, [r1]
    ldmia r0, {r0, r1}
    msr msp, r0
    bx r1

/* Wait until the TX FIFO is empty (SR bit 2) and the SSI is idle (SR bit 0 clear). */
wait_idle:
    push {r0, r1, lr}
1:
    ldr r1, [r3, #SSI_SR]
    movs r0, #4
    tst r1, r0
    beq 1b
    movs r0, #1
    tst r1, r0
    bne 1b
    pop {r0, r1, pc}

/* r0 = command; returns the status byte in r0. */
read_status:
    push {lr}
    str r0, [r3, #SSI_DR0]
    str r0, [r3, #SSI_DR0]          /* dummy byte clocks the status out */
    bl wait_idle
    ldr r0, [r3, #SSI_DR0]
    ldr r0, [r3, #SSI_DR0]
    pop {pc}

    .ltorg
