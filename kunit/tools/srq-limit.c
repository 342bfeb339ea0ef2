// SPDX-License-Identifier: GPL-2.0
/*
 * srq-limit: a shared receive queue's limit event, seen from user space through libibverbs and
 * the device's stock provider, over an rdma_cm connection.
 *
 *   srq-limit server ADDR PORT    the server's QP takes its receives from an SRQ holding 4,
 *                                 armed with limit 3
 *   srq-limit client ADDR PORT SRC
 *                                 from address SRC (so from the device that has it), sends three
 *                                 messages, each after the server says so
 *
 * After the first message 3 receives are left (not below the limit): no event may come. After
 * the second 2 are left: IBV_EVENT_SRQ_LIMIT_REACHED must come for the SRQ. The event disarms
 * the limit, so after the third (1 left) none may come. (rdma-core's siw provider has no
 * ibv_query_srq, so the limit is checked by its effect.) The messages' bytes are checked.
 * Exits 0 when all of that held, 1 otherwise, printing what happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm-tool.h"

#define MSG 64
#define POSTED 4
#define LIMIT 3

/* Polls `cq` for one completion, up to `ms` milliseconds. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
	}
}

/*
 * Polls `cq` for the completion of kind `opcode`, up to `ms` milliseconds for each completion.
 * The send and receive queues' completions are not ordered against each other, even on one
 * CQ: the client's next message may complete before the Send that let it go on does. So a
 * receive completion met while waiting for a send's is kept in `early` and handed out by the
 * next wait for a receive. An error completion (whose opcode is undefined) or one of neither
 * kind is returned as it is, for the caller to reject. 0 if none came in time.
 */
static int poll_kind(struct ibv_cq *cq, struct ibv_wc *wc, enum ibv_wc_opcode opcode,
		     struct ibv_wc *early, int *have_early, int ms)
{
	if (opcode == IBV_WC_RECV && *have_early) {
		*wc = *early;
		*have_early = 0;
		return 1;
	}
	for (;;) {
		int n = poll_one(cq, wc, ms);

		if (n <= 0 || wc->status || wc->opcode == opcode)
			return n;
		if (opcode != IBV_WC_SEND || wc->opcode != IBV_WC_RECV || *have_early)
			return n;
		*early = *wc;
		*have_early = 1;
	}
}

/* Waits up to `ms` for an asynchronous event; 1 if one came (and was acknowledged). */
static int async_event(struct ibv_context *ctx, int ms, struct ibv_async_event *ev)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return 0;
	if (ibv_get_async_event(ctx, ev))
		die("ibv_get_async_event");
	ibv_ack_async_event(ev);
	return 1;
}

static int server(struct rdma_addrinfo *res)
{
	struct rdma_cm_id *listen_id, *id;
	struct ibv_async_event ev;
	struct ibv_srq_attr sa;
	struct ibv_wc wc, early;
	char buf[POSTED + 1][MSG];
	int failures = 0, have_early = 0, i;

	if (rdma_create_ep(&listen_id, res, NULL, NULL))
		die("rdma_create_ep");
	if (rdma_listen(listen_id, 1))
		die("rdma_listen");
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_request(listen_id, &id))
		die("rdma_get_request");

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);

	if (!pd || !srq || !cq)
		die("pd/srq/cq");
	struct ibv_qp_init_attr qi = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qi))
		die("rdma_create_qp");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		die("ibv_reg_mr");
	memset(buf, 0, sizeof(buf));
	for (i = 0; i < POSTED; i++) {
		struct ibv_sge sge = { (uintptr_t)buf[i], MSG, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("ibv_post_srq_recv");
	}
	sa.srq_limit = LIMIT;
	if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT))
		die("ibv_modify_srq (arm the limit)");
	if (rdma_accept(id, NULL))
		die("rdma_accept");

	for (int round = 1; round <= 4; round++) {
		/* Tell the client to go on after each message, and when done. */
		if (round > 1) {
			strcpy(buf[POSTED], round == 4 ? "bye" : "go");
			struct ibv_sge sge = { (uintptr_t)buf[POSTED], 3, mr->lkey };
			struct ibv_send_wr swr = { .sg_list = &sge, .num_sge = 1,
						   .opcode = IBV_WR_SEND }, *sbad;

			if (ibv_post_send(id->qp, &swr, &sbad))
				die("ibv_post_send");
			memset(&wc, 0, sizeof(wc));
			if (poll_kind(cq, &wc, IBV_WC_SEND, &early, &have_early, 10000) <= 0 ||
			    wc.status || wc.opcode != IBV_WC_SEND)
				return fprintf(stderr, "FAIL: round %d: send completion (status %d, opcode %d)\n",
					       round, wc.status, wc.opcode), 1;
		}
		if (round == 4)
			break;
		char want[16];

		snprintf(want, sizeof(want), "message %d", round);
		memset(&wc, 0, sizeof(wc));
		if (poll_kind(cq, &wc, IBV_WC_RECV, &early, &have_early, 10000) <= 0 ||
		    wc.status || wc.opcode != IBV_WC_RECV)
			return fprintf(stderr, "FAIL: receive %d (status %d, opcode %d)\n", round,
				       wc.status, wc.opcode), 1;
		if (strcmp(buf[wc.wr_id], want))
			failures++, fprintf(stderr, "FAIL: message %d reads '%.*s'\n", round, MSG,
					    buf[wc.wr_id]);
		int left = POSTED - round, got = async_event(id->verbs, round == 2 ? 5000 : 500, &ev);

		if (round == 2 && !got)
			failures++, fprintf(stderr, "FAIL: no event with %d receives left (limit %d)\n",
					    left, LIMIT);
		else if (round == 2 && (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED ||
					ev.element.srq != srq))
			failures++, fprintf(stderr, "FAIL: event %s, want SRQ limit reached\n",
					    ibv_event_type_str(ev.event_type));
		else if (round == 2)
			printf("SRQ limit reached with %d receives left (limit %d)\n", left, LIMIT),
				fflush(stdout);
		else if (got)
			failures++, fprintf(stderr, "FAIL: event %s with %d receives left (%s)\n",
					    ibv_event_type_str(ev.event_type), left,
					    round == 1 ? "not below the limit" : "limit disarmed");
	}

	/* The client disconnects once it has the bye (as rping's client does). */
	cm_tool_passive_close(id, 5000);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_srq(srq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_ep(listen_id);
	return failures ? 1 : 0;
}

static int client(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_cm_id *id;
	struct ibv_wc wc;
	char buf[3][MSG];

	if (rdma_create_ep(&id, res, NULL, &qi))
		die("rdma_create_ep");
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof(buf));

	if (!mr)
		die("rdma_reg_msgs");
	if (rdma_post_recv(id, NULL, buf[2], MSG, mr))
		die("rdma_post_recv");
	if (rdma_connect(id, NULL))
		die("rdma_connect");
	for (int round = 1; round <= 3; round++) {
		if (round > 1) {
			if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status || strcmp(buf[2], "go"))
				die("the server's go");
			if (rdma_post_recv(id, NULL, buf[2], MSG, mr))
				die("rdma_post_recv");
		}
		snprintf(buf[0], MSG, "message %d", round);
		if (rdma_post_send(id, NULL, buf[0], strlen(buf[0]) + 1, mr, 0) ||
		    rdma_get_send_comp(id, &wc) <= 0 || wc.status)
			die("send");
	}
	/* The server says bye once it has checked everything. */
	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status || strcmp(buf[2], "bye"))
		die("the server's bye");
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo *res;

	return cm_tool_args(argc, argv, &res) ? server(res) : client(res);
}
