// SPDX-License-Identifier: GPL-2.0
/*
 * reg-mr-abuse: a process registers memory as a buggy or hostile one can, and the device must
 * refuse cleanly and keep nothing of it.
 *
 *   reg-mr-abuse DEVICE
 *
 * 1. A registration of 1 MiB whose response buffer has no room for the provider's part (the
 *    siw ABI's STag), sent as the raw uverbs command the stock provider would send with a
 *    short output length. It must fail, and leave no region behind: the process's pinned
 *    memory (VmPin) is what it was before, which a region left behind would keep pinned (a
 *    registration that succeeds, first, shows that VmPin counts the region).
 * 2. A child process without CAP_IPC_LOCK and with a 1 MiB locked-memory limit registers
 *    8 GiB (reserved, never touched): refused with ENOMEM, the device sizing nothing for it
 *    before the RDMA core checked the limit.
 * Exits 0 when both held, 1 otherwise, printing what happened.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static void fail(const char *what)
{
	fprintf(stderr, "FAIL: %s (%s)\n", what, strerror(errno));
	exit(1);
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!list)
		fail("ibv_get_device_list");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		fail("no such device, or it cannot be opened");
	return ctx;
}

/* REG_MR as the legacy write command, with room for the RDMA core's response only. */
static int reg_mr_without_room(struct ibv_context *ctx, struct ibv_pd *pd, void *buf, size_t len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_reg_mr cmd;
	} req;
	struct ib_uverbs_reg_mr_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_REG_MR;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.start = (uintptr_t)buf;
	req.cmd.length = len;
	req.cmd.hca_va = (uintptr_t)buf;
	req.cmd.pd_handle = pd->handle;
	req.cmd.access_flags = ACCESS;
	return write(ctx->cmd_fd, &req, sizeof(req)) == sizeof(req) ? 0 : -errno;
}

/* The process's pinned memory in KiB (VmPin of /proc/self/status). */
static long pinned_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	long kib = -1;

	if (!f)
		fail("/proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kib) == 1)
			break;
	fclose(f);
	if (kib < 0)
		fail("no VmPin in /proc/self/status");
	return kib;
}

static int short_response(const char *name)
{
	const size_t len = 1 << 20;
	struct ibv_context *ctx = open_named(name);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	void *buf = aligned_alloc(4096, len);
	long before, registered, after;
	struct ibv_mr *mr;
	int ret;

	if (!pd || !buf)
		fail("PD or buffer");
	memset(buf, 0, len);
	before = pinned_kib();
	/* The witness works: a registration that succeeds shows as pinned until deregistered. */
	mr = ibv_reg_mr(pd, buf, len, ACCESS);
	if (!mr)
		fail("ibv_reg_mr");
	registered = pinned_kib();
	if (ibv_dereg_mr(mr))
		fail("ibv_dereg_mr");
	printf("a registration of %zu KiB: pinned %ld KiB before, %ld KiB with it, %ld KiB after\n",
	       len >> 10, before, registered, pinned_kib());
	ret = reg_mr_without_room(ctx, pd, buf, len);
	after = pinned_kib();
	printf("short response: %s; pinned %ld KiB before, %ld KiB after\n",
	       ret ? strerror(-ret) : "registered", before, after);
	ret = ret != 0 && after == before && registered == before + (long)(len >> 10) ? 0 : 1;
	if (ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		fail("cleanup");
	free(buf);
	return ret;
}

/* Drops CAP_IPC_LOCK from the effective and permitted sets (root keeps the others). */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &head, data))
		fail("capget");
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &head, data))
		fail("capset");
}

static int huge(const char *name)
{
	const size_t len = 8ull << 30;
	struct rlimit limit = { 1 << 20, 1 << 20 };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *p;

	if (setrlimit(RLIMIT_MEMLOCK, &limit))
		fail("setrlimit");
	/* Before the device is opened: the RDMA core ties the file to the opener's credentials. */
	drop_ipc_lock();
	ctx = open_named(name);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd");
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		fail("mmap 8 GiB");
	mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE);
	printf("8 GiB with a 1 MiB limit: %s\n", mr ? "registered" : strerror(errno));
	return mr == NULL && errno == ENOMEM ? 0 : 1;
}

int main(int argc, char **argv)
{
	int status, failed;
	pid_t child;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	failed = short_response(argv[1]);
	fflush(stdout);
	child = fork();
	if (child < 0)
		fail("fork");
	if (child == 0) {
		status = huge(argv[1]);
		fflush(stdout);
		_exit(status);
	}
	if (waitpid(child, &status, 0) != child)
		fail("waitpid");
	failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	return failed;
}
