/*
 * tools/tcg-profile/critical-path.sh: a per-vCPU trace of the guest's executed translation
 * blocks (QEMU 7.2 plugin API v1), from the first execution of the block at trig= (a kernel
 * address) on. Each record is 16 bytes: the block's address (1 for user space) and its
 * instruction count; the trace of vCPU N goes to <out>.N. Kernel addresses keep their top byte
 * (0xff) implied.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stddef.h>
#include "qemu-plugin-v1.h"
#define MAXEV (1ull << 26)
struct ev { uint64_t v; uint64_t n; };
static struct ev *evs[2]; static uint64_t nev[2];
static volatile int on;
static uint64_t trig;
static const char *out = "/tmp/trace";
static void hit(unsigned int vcpu, void *u)
{
    uint64_t x = (uint64_t)(uintptr_t)u;
    uint64_t v = x >> 8 | 0xff00000000000000ull;
    if (!on) { if (v == trig) on = 1; else return; }
    if (vcpu > 1 || nev[vcpu] >= MAXEV) return;
    evs[vcpu][nev[vcpu]++] = (struct ev){ v, x & 0xff };
}
static void hit_user(unsigned int vcpu, void *u)
{
    if (!on || vcpu > 1 || nev[vcpu] >= MAXEV) return;
    evs[vcpu][nev[vcpu]++] = (struct ev){ 1, (uint64_t)(uintptr_t)u };
}
static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    uint64_t v = qemu_plugin_tb_vaddr(tb), n = qemu_plugin_tb_n_insns(tb);
    if (n > 255) n = 255;
    if (v >> 56 == 0xff)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, hit, 0, (void *)(uintptr_t)((v << 8) | n));
    else
        qemu_plugin_register_vcpu_tb_exec_cb(tb, hit_user, 0, (void *)(uintptr_t)n);
}
static void done(qemu_plugin_id_t id, void *p)
{
    char path[512];
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s.%d", out, c);
        FILE *f = fopen(path, "wb"); if (!f) continue;
        fwrite(evs[c], sizeof(struct ev), nev[c], f); fclose(f);
    }
}
__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4)) out = argv[i] + 4;
        if (!strncmp(argv[i], "trig=", 5)) trig = strtoull(argv[i] + 5, NULL, 16);
    }
    for (int c = 0; c < 2; c++) evs[c] = malloc(sizeof(struct ev) * MAXEV);
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
    return 0;
}
