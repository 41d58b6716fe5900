/* A QEMU TCG plugin (plugin API version 1, QEMU 7.x-8.2) that records the instructions
 * executed by one call of a function and the data addresses they access, without changing
 * the firmware: recording starts when the function's first instruction executes and stops
 * when execution reaches the instruction after the call (the return address).
 *
 * Arguments: entry=0xADDR (the function's address, Thumb bit clear), out=PATH.
 * Output (little-endian uint32 words): an even word is the PC of an executed instruction;
 * an odd word is a data access of the preceding instruction, bit 1..2 = log2(size),
 * bit 3 = store, followed by one word with the address.
 *
 * The few plugin API declarations it needs are written here (QEMU's Debian package ships no
 * qemu-plugin.h); their ABI is that of QEMU's include/qemu/qemu-plugin.h.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata);
typedef void (*atexit_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, mem_cb_t cb, enum qemu_plugin_cb_flags flags,
                                      enum qemu_plugin_mem_rw rw, void *userdata);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, atexit_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static FILE *out;
static uint32_t entry;
static uint32_t stop_pc;
static uint32_t prev_pc, prev_size;
static int state; /* 0 before the call, 1 recording, 2 done */
static uint64_t recorded;

static void put(uint32_t word)
{
    fwrite(&word, sizeof word, 1, out);
}

static void on_insn(unsigned int vcpu, void *userdata)
{
    uintptr_t packed = (uintptr_t)userdata;
    uint32_t pc = (uint32_t)(packed & 0xFFFFFFFFu);
    uint32_t size = (uint32_t)(packed >> 32);
    (void)vcpu;
    if (state == 0 && pc == entry) {
        state = 1;
        stop_pc = prev_pc + prev_size;
    } else if (state == 1 && pc == stop_pc) {
        state = 2;
    }
    if (state == 1) {
        put(pc);
        recorded++;
    }
    prev_pc = pc;
    prev_size = size;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata)
{
    (void)vcpu;
    (void)userdata;
    if (state != 1)
        return;
    put(1u | (qemu_plugin_mem_size_shift(info) << 1) | (qemu_plugin_mem_is_store(info) ? 8u : 0u));
    put((uint32_t)vaddr);
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    (void)id;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uintptr_t packed = (uintptr_t)(uint32_t)qemu_plugin_insn_vaddr(insn)
                           | ((uintptr_t)qemu_plugin_insn_size(insn) << 32);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS, (void *)packed);
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
    }
}

static void on_exit_cb(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    if (out) {
        fflush(out);
        fclose(out);
        out = NULL;
    }
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv)
{
    const char *path = NULL;
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "entry=", 6) == 0)
            entry = (uint32_t)strtoul(argv[i] + 6, NULL, 0) & ~1u;
        else if (strncmp(argv[i], "out=", 4) == 0)
            path = argv[i] + 4;
    }
    if (path == NULL || entry == 0)
        return -1;
    out = fopen(path, "wb");
    if (out == NULL)
        return -1;
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
