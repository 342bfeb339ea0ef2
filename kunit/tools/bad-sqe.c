// SPDX-License-Identifier: GPL-2.0
/*
 * bad-sqe: a process writes malformed entries straight into the send and receive queues it
 * shares with a siw-ABI device (as a buggy or hostile program can: the rings are plain memory
 * of the process), and the device must complete each with an error instead of acting on it.
 *
 *   bad-sqe DEVICE
 *
 * Creates an unconnected RC QP, posts one good send and one good receive through the stock
 * provider (so they sit in the rings), finds the rings among the process's mappings of the
 * device file by those entries, writes malformed entries after them (an unknown opcode, a
 * kernel-only opcode, too many SGEs, oversized inline data, inline data on a Read; a receive
 * with too many SGEs), then moves the QP to ERROR, which makes the device take every entry.
 * Expected completions: the good ones flushed (IBV_WC_WR_FLUSH_ERR), each malformed one with
 * the error the siw ABI's rules give it. Then a CQ too small for what a QP flushes into it
 * must overflow with IBV_EVENT_CQ_ERR. Exits 0 when all that held, 1 otherwise.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/siw-abi.h>

#define MAGIC_SEND 0x5157a11d5e4d0001ull
#define MAGIC_RECV 0x5157a11d5e4d0002ull

static int failures;

static void fail(const char *what)
{
	fprintf(stderr, "FAIL: %s (%s)\n", what, strerror(errno));
	exit(1);
}

/* The mapping of the device file holding an entry with id `magic` at its start. */
static void *find_ring(uint64_t magic)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	void *found = NULL;

	if (!f)
		fail("/proc/self/maps");
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		if (!strstr(line, "uverbs") || sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		if (*(volatile uint64_t *)start == magic)
			found = (void *)start;
	}
	fclose(f);
	return found;
}

struct expect {
	uint64_t id;
	enum ibv_wc_status status;
	const char *what;
};

int main(int argc, char **argv)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		fail("opening the device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	static char buf[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr qi = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 2,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *qp = cq && mr ? ibv_create_qp(pd, &qi) : NULL;

	if (!qp)
		fail("pd/cq/mr/qp");
	struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_send_wr swr = { .wr_id = MAGIC_SEND, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_recv_wr rwr = { .wr_id = MAGIC_RECV, .sg_list = &sge, .num_sge = 1 }, *rbad;

	/* Unconnected: the entries wait in the rings. */
	if (ibv_post_send(qp, &swr, &sbad) || ibv_post_recv(qp, &rwr, &rbad))
		fail("posting the good entries");
	struct siw_sqe *sq = find_ring(MAGIC_SEND);
	struct siw_rqe *rq = find_ring(MAGIC_RECV);

	if (!sq || !rq)
		fail("finding the rings");

	static const struct {
		uint8_t opcode, num_sge;
		uint16_t flags;
		uint32_t inline_len;
		enum ibv_wc_status status;
		const char *what;
	} bad[] = {
		{ 99, 1, 0, 0, IBV_WC_LOC_QP_OP_ERR, "an unknown opcode" },
		{ SIW_OP_REG_MR, 1, 0, 0, IBV_WC_LOC_QP_OP_ERR, "a kernel-only opcode" },
		{ SIW_OP_SEND, 200, 0, 0, IBV_WC_LOC_LEN_ERR, "200 SGEs" },
		{ SIW_OP_SEND, 1, SIW_WQE_INLINE, 4000, IBV_WC_LOC_LEN_ERR, "4000 bytes inline" },
		{ SIW_OP_READ, 1, SIW_WQE_INLINE, 8, IBV_WC_LOC_QP_OP_ERR, "inline data on a Read" },
	};
	struct expect want[16];
	int n = 0;

	want[n++] = (struct expect){ MAGIC_SEND, IBV_WC_WR_FLUSH_ERR, "the good send" };
	for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		struct siw_sqe *e = &sq[1 + i];

		memset(e, 0, sizeof(*e));
		e->id = 0x1000 + i;
		e->opcode = bad[i].opcode;
		e->num_sge = bad[i].num_sge;
		e->sge[0].length = bad[i].inline_len ? bad[i].inline_len : 64;
		e->sge[0].laddr = (uintptr_t)buf;
		e->sge[0].lkey = mr->lkey;
		__atomic_store_n(&e->flags, SIW_WQE_VALID | SIW_WQE_SIGNALLED | bad[i].flags,
				 __ATOMIC_RELEASE);
		want[n++] = (struct expect){ e->id, bad[i].status, bad[i].what };
	}
	want[n++] = (struct expect){ MAGIC_RECV, IBV_WC_WR_FLUSH_ERR, "the good receive" };
	memset(&rq[1], 0, sizeof(rq[1]));
	rq[1].id = 0x2000;
	rq[1].num_sge = 99;
	__atomic_store_n(&rq[1].flags, SIW_WQE_VALID, __ATOMIC_RELEASE);
	want[n++] = (struct expect){ 0x2000, IBV_WC_LOC_LEN_ERR, "a receive with 99 SGEs" };

	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE))
		fail("moving the QP to ERROR");

	/* Every entry completes, in any order between the queues. */
	struct ibv_wc wc[32];
	int got = 0, tries;

	for (tries = 0; tries < 2000 && got < n; tries++) {
		int k = ibv_poll_cq(cq, 32 - got, wc + got);

		if (k < 0)
			fail("ibv_poll_cq");
		got += k;
		if (got < n)
			usleep(1000);
	}
	for (i = 0; i < n; i++) {
		int j, seen = 0;

		for (j = 0; j < got; j++) {
			if (wc[j].wr_id != want[i].id)
				continue;
			seen = 1;
			if (wc[j].status != want[i].status) {
				fprintf(stderr, "FAIL: %s completed with %s, want %s\n", want[i].what,
					ibv_wc_status_str(wc[j].status),
					ibv_wc_status_str(want[i].status));
				failures++;
			} else {
				printf("%s: %s\n", want[i].what, ibv_wc_status_str(wc[j].status));
			}
		}
		if (!seen) {
			fprintf(stderr, "FAIL: no completion for %s\n", want[i].what);
			failures++;
		}
	}
	if (got != n) {
		fprintf(stderr, "FAIL: %d completions, want %d\n", got, n);
		failures++;
	}
	/* Six flushed sends into a CQ of two entries: the overflow is an asynchronous event. */
	struct ibv_cq *small = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	struct ibv_qp_init_attr si = qi;

	si.send_cq = si.recv_cq = small;
	si.cap.max_inline_data = 0;
	struct ibv_qp *qp2 = small ? ibv_create_qp(pd, &si) : NULL;

	if (!qp2)
		fail("the small CQ's QP");
	for (i = 0; i < 6; i++) {
		swr.wr_id = 0x3000 + i;
		if (ibv_post_send(qp2, &swr, &sbad))
			fail("posting to the small CQ's QP");
	}
	if (ibv_modify_qp(qp2, &attr, IBV_QP_STATE))
		fail("moving the second QP to ERROR");
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (poll(&p, 1, 5000) <= 0 || ibv_get_async_event(ctx, &ev)) {
		fprintf(stderr, "FAIL: no asynchronous event for the overflowing CQ\n");
		failures++;
	} else {
		if (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != small) {
			fprintf(stderr, "FAIL: event %s, want CQ error\n",
				ibv_event_type_str(ev.event_type));
			failures++;
		} else {
			printf("a CQ of 2 entries given 6 completions: %s\n",
			       ibv_event_type_str(ev.event_type));
		}
		ibv_ack_async_event(&ev);
	}
	ibv_destroy_qp(qp2);
	ibv_destroy_cq(small);

	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
