/*
 * tools/tcg-profile/critical-path.sh: the host time at which each vCPU enters a few guest kernel
 * functions (QEMU 7.2 plugin API v1). Arguments: out=<file>, trig=<address of the trigger block>,
 * syms=<host path of the guest's /proc/kallsyms, written before the trigger runs>, then up to
 * 15 times w=<symbol name> (w=*<end> for a name that ends so). A module's load address changes between boots,
 * so the names are resolved when the trigger first runs; the translated blocks are flushed then
 * (qemu_plugin_reset), and from then on only the blocks that start at a watched function get a
 * callback, which leaves the guest at nearly its usual pace. Each record is 16 bytes:
 * CLOCK_MONOTONIC nanoseconds, the vCPU, and the index (from 1) of the name in the arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include "qemu-plugin-v1.h"
#define MAXEV (1u << 24)
#define MAXW 16
struct ev { uint64_t t; uint32_t vcpu, id; };
static struct ev *evs;
static uint64_t nev;
static const char *names[MAXW];
static uint64_t watch[MAXW];
static int nwatch = 1; /* index 0: the trigger */
static volatile int on, resetting;
static qemu_plugin_id_t self;
static const char *out = "/tmp/time", *syms = "";
static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
static void done(qemu_plugin_id_t id, void *p);
static void hit(unsigned int vcpu, void *u)
{
    uint32_t id = (uint32_t)(uintptr_t)u;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t i = __atomic_fetch_add(&nev, 1, __ATOMIC_RELAXED);
    if (i < MAXEV) evs[i] = (struct ev){ ts.tv_sec * 1000000000ull + ts.tv_nsec, vcpu, id };
}
/* Resolves the names in the guest's symbols and starts recording. */
static void resolved(qemu_plugin_id_t id)
{
    FILE *f = fopen(syms, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        char name[900]; unsigned long long addr; char type;
        if (sscanf(line, "%llx %c %899s", &addr, &type, name) != 3) continue;
        size_t len = strlen(name);
        for (int i = 1; i < nwatch; i++) {
            /* "*end" matches a name that ends so, anything else the whole name. */
            const char *want = names[i] + (names[i][0] == '*');
            size_t n = strlen(want);
            bool match = names[i][0] == '*' ? len >= n && !strcmp(name + len - n, want)
                                            : !strcmp(name, want);
            if (!watch[i] && match) watch[i] = addr;
        }
    }
    if (f) fclose(f);
    for (int i = 1; i < nwatch; i++)
        if (!watch[i]) fprintf(stderr, "tb-time: %s not in %s\n", names[i], syms);
    on = 1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
}
static void trigger(unsigned int vcpu, void *u)
{
    if (!__atomic_exchange_n(&resetting, 1, __ATOMIC_RELAXED))
        qemu_plugin_reset(self, resolved);
}
static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    uint64_t v = qemu_plugin_tb_vaddr(tb);
    if (!on) {
        if (v == watch[0]) qemu_plugin_register_vcpu_tb_exec_cb(tb, trigger, 0, NULL);
        return;
    }
    for (int i = 1; i < nwatch; i++)
        if (v == watch[i])
            qemu_plugin_register_vcpu_tb_exec_cb(tb, hit, 0, (void *)(uintptr_t)i);
}
static void done(qemu_plugin_id_t id, void *p)
{
    FILE *f = fopen(out, "wb");
    if (!f) return;
    fwrite(evs, sizeof(struct ev), nev < MAXEV ? nev : MAXEV, f);
    fclose(f);
}
__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    self = id;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4)) out = argv[i] + 4;
        if (!strncmp(argv[i], "syms=", 5)) syms = argv[i] + 5;
        if (!strncmp(argv[i], "trig=", 5)) watch[0] = strtoull(argv[i] + 5, NULL, 16);
        if (!strncmp(argv[i], "w=", 2) && nwatch < MAXW) names[nwatch++] = argv[i] + 2;
    }
    evs = malloc(sizeof(struct ev) * MAXEV);
    if (!evs) return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
    return 0;
}
