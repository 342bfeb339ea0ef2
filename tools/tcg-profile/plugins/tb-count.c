// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for tools/tcg-profile/profile.sh: counts how often each translation block
 * executes, so that guest instructions and blocks can be attributed to kernel functions
 * afterwards.
 *
 * Timing a small message under TCG is noisy (a whole connection can sit 5 us slower), while
 * these counts are exact: they show what a change removes. Only the few entry points the
 * plugin uses are declared here; they are those of QEMU 7.2's plugin API, version 1 (Debian
 * 12's QEMU). Output, at exit, to the file named by `out=`: "vaddr instructions executions"
 * per block that ran.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu-plugin-v1.h"

/* One record per translation (a block translated again gets another); never freed. */
struct block {
	uint64_t vaddr;
	uint64_t executions;
	uint32_t insns;
};

#define CHUNK 65536
static struct block **chunks;
static size_t nchunks, used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *out_path = "tb-count.out";

static struct block *new_block(void)
{
	struct block *b = NULL;

	pthread_mutex_lock(&lock);
	if (used == nchunks * CHUNK) {
		struct block **grown = realloc(chunks, sizeof(*chunks) * (nchunks + 1));
		struct block *chunk = calloc(CHUNK, sizeof(**chunks));

		if (!grown || !chunk) {
			free(chunk);
			if (grown)
				chunks = grown;
			goto out;
		}
		chunks = grown;
		chunks[nchunks++] = chunk;
	}
	b = &chunks[used / CHUNK][used % CHUNK];
	used++;
out:
	pthread_mutex_unlock(&lock);
	return b;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = new_block();

	if (!b)
		return;
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	/* Not atomic: two vCPUs running one block at once may lose a count, rarely. */
	qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &b->executions, 1);
}

static void write_counts(qemu_plugin_id_t id, void *udata)
{
	FILE *f = fopen(out_path, "w");

	if (!f)
		return;
	for (size_t i = 0; i < used; i++) {
		struct block *b = &chunks[i / CHUNK][i % CHUNK];

		if (b->executions)
			fprintf(f, "%llx %u %llu\n", (unsigned long long)b->vaddr, b->insns,
				(unsigned long long)b->executions);
	}
	fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
								const qemu_info_t *info, int argc,
								char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, write_counts, NULL);
	return 0;
}
