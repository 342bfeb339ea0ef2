/*
 * The part of QEMU's TCG plugin API (version 1, QEMU 7.2 as Debian 12 ships it) that the
 * plugins here use, declared here because Debian packages no qemu-plugin.h. A plugin includes
 * this header once and defines qemu_plugin_install().
 */
#ifndef RSIW_QEMU_PLUGIN_V1_H
#define RSIW_QEMU_PLUGIN_V1_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct {
	const char *target_name;
	struct {
		int min, cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus, max_vcpus;
		} system;
	};
} qemu_info_t;
struct qemu_plugin_tb;
enum { INLINE_ADD_U64 = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  void (*cb)(unsigned int vcpu, void *udata), int flags,
					  void *udata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, int op, void *ptr,
					      uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *),
				    void *udata);
/* Unregisters every callback and flushes the translated blocks, then calls cb. */
void qemu_plugin_reset(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t));

__attribute__((visibility("default"))) int qemu_plugin_version = 1;
#endif
