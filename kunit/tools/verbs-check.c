// SPDX-License-Identifier: GPL-2.0
/*
 * verbs-check: what user space can do with a device through libibverbs and its stock
 * provider, verb by verb. Built on the host against Debian's libibverbs-dev and run in the VM.
 *
 *   verbs-check DEVICE PDS [unsupported-verb...]
 *   verbs-check DEVICE --await-event active|err SECONDS
 *
 * Opens DEVICE, queries it and its port, allocates and frees PDS protection domains, then runs
 * each named check: cq (create a CQ, poll it empty, arm it, destroy it), cq-too-big (refused),
 * cq-unsupported (fails cleanly with EOPNOTSUPP), qp (create and destroy an RC QP), qp-states
 * (the same, moving it through the states an unconnected QP may take), qp-no-modify (moving it
 * to INIT fails cleanly with EOPNOTSUPP). Exits 0 when
 * everything behaved, 1 otherwise, printing what happened. The second form opens DEVICE, prints
 * "ready" and waits for the port's asynchronous event (IBV_EVENT_PORT_ACTIVE or _ERR).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int failures;

#define CHECK(cond, ...)                                  \
	do {                                              \
		if (!(cond)) {                            \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);              \
			failures++;                       \
		}                                         \
	} while (0)

/* Moves an unconnected QP through the states it may take; returns the failures. */
static int qp_states(struct ibv_qp *qp)
{
	static const struct {
		enum ibv_qp_state to;
		int ok;           /* expect success */
		enum ibv_qp_state reads; /* ibv_query_qp afterwards */
	} steps[] = {
		{ IBV_QPS_INIT, 1, IBV_QPS_INIT },
		{ IBV_QPS_RTR, 1, IBV_QPS_RTR },
		{ IBV_QPS_RTS, 0, IBV_QPS_RTR },  /* no connection: refused */
		{ IBV_QPS_ERR, 1, IBV_QPS_ERR },
		{ IBV_QPS_RTR, 0, IBV_QPS_ERR },  /* only a reset leaves ERROR */
		{ IBV_QPS_RESET, 1, IBV_QPS_INIT }, /* iWARP IDLE reads as INIT */
	};
	int failed = 0;
	unsigned int s;

	for (s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct ibv_qp_attr ma = { .qp_state = steps[s].to }, qa;
		struct ibv_qp_init_attr ia;
		int rc = ibv_modify_qp(qp, &ma, IBV_QP_STATE);

		if ((rc == 0) != steps[s].ok) {
			fprintf(stderr, "FAIL: modify to state %d: rc %d, want %s\n", steps[s].to, rc,
				steps[s].ok ? "success" : "failure");
			failed++;
		}
		if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia) || qa.qp_state != steps[s].reads) {
			fprintf(stderr, "FAIL: after modify to %d, state reads %d, want %d\n",
				steps[s].to, qa.qp_state, steps[s].reads);
			failed++;
		}
	}
	if (!failed)
		printf("QP %u: INIT, RTR, no RTS without a connection, ERR, reset: ok\n", qp->qp_num);
	return failed;
}

static int await_event(struct ibv_context *ctx, const char *want, int seconds)
{
	enum ibv_event_type type = !strcmp(want, "active") ? IBV_EVENT_PORT_ACTIVE :
							     IBV_EVENT_PORT_ERR;
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int n = poll(&pfd, 1, seconds * 1000);

		if (n <= 0) {
			fprintf(stderr, "FAIL: no %s event within %d s\n", want, seconds);
			return 1;
		}
		if (ibv_get_async_event(ctx, &ev)) {
			fprintf(stderr, "FAIL: ibv_get_async_event: %s\n", strerror(errno));
			return 1;
		}
		ibv_ack_async_event(&ev);
		printf("event %s on port %d\n", ibv_event_type_str(ev.event_type),
		       ev.element.port_num);
		if (ev.event_type == type && ev.element.port_num == 1)
			return 0;
	}
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_pd **pds;
	int n, i, npds;

	if (argc < 3) {
		fprintf(stderr, "usage: %s DEVICE PDS [cq|cq-too-big|cq-unsupported|qp|qp-states|qp-no-modify]...\n", argv[0]);
		return 2;
	}
	npds = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "FAIL: no device %s\n", argv[1]);
		return 1;
	}
	ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, "FAIL: ibv_open_device: %s\n", strerror(errno));
		return 1;
	}
	if (!strcmp(argv[2], "--await-event")) {
		int rc = argc > 4 ? await_event(ctx, argv[3], atoi(argv[4])) : 2;

		ibv_close_device(ctx);
		ibv_free_device_list(list);
		return rc;
	}
	CHECK(!ibv_query_device(ctx, &attr), "ibv_query_device");
	CHECK(!ibv_query_port(ctx, 1, &port), "ibv_query_port");
	printf("%s: max_qp %d max_pd %d, port state %d\n", argv[1], attr.max_qp, attr.max_pd,
	       port.state);

	pds = calloc(npds, sizeof(*pds));
	for (i = 0; i < npds; i++) {
		pds[i] = ibv_alloc_pd(ctx);
		CHECK(pds[i], "ibv_alloc_pd #%d: %s", i, strerror(errno));
	}
	for (i = 0; i < npds; i++)
		if (pds[i])
			CHECK(!ibv_dealloc_pd(pds[i]), "ibv_dealloc_pd #%d", i);
	printf("%s: %d PDs allocated and freed\n", argv[1], npds);

	for (i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "cq")) {
			/* A CQ through the provider's mapped ring: create, poll empty, arm, destroy. */
			struct ibv_cq *cq = ibv_create_cq(ctx, 100, NULL, NULL, 0);
			struct ibv_wc wc;

			CHECK(cq, "ibv_create_cq: %s", strerror(errno));
			if (!cq)
				continue;
			CHECK(cq->cqe >= 100, "ibv_create_cq: %d entries, asked for 100", cq->cqe);
			CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "ibv_poll_cq on an empty CQ");
			CHECK(!ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
			CHECK(!ibv_destroy_cq(cq), "ibv_destroy_cq");
			printf("%s: CQ of %d entries created, polled empty, armed, destroyed\n",
			       argv[1], cq->cqe);
		} else if (!strcmp(argv[i], "qp") || !strcmp(argv[i], "qp-no-modify") ||
			   !strcmp(argv[i], "qp-states")) {
			/*
			 * An RC QP with its send and receive rings mapped by the provider; with
			 * qp-no-modify, moving it to INIT must fail cleanly (not implemented).
			 */
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
			struct ibv_qp_init_attr qa = {
				.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				.cap = { .max_send_wr = 50, .max_recv_wr = 20,
					 .max_send_sge = 1, .max_recv_sge = 1 },
			};
			struct ibv_qp *qp = cq ? ibv_create_qp(pd, &qa) : NULL;

			CHECK(qp, "ibv_create_qp: %s", strerror(errno));
			if (qp) {
				CHECK(qp->qp_num != 0, "QP number 0");
				CHECK(qa.cap.max_send_wr >= 50 && qa.cap.max_recv_wr >= 20,
				      "QP capacities %u/%u below 50/20", qa.cap.max_send_wr,
				      qa.cap.max_recv_wr);
				if (!strcmp(argv[i], "qp-states"))
					failures += qp_states(qp);
				if (!strcmp(argv[i], "qp-no-modify")) {
					struct ibv_qp_attr ma = { .qp_state = IBV_QPS_INIT,
								  .port_num = 1 };
					int rc = ibv_modify_qp(qp, &ma, IBV_QP_STATE | IBV_QP_PORT |
							       IBV_QP_ACCESS_FLAGS);

					CHECK(rc == EOPNOTSUPP || (rc && errno == EOPNOTSUPP),
					      "ibv_modify_qp: %d (%s), want EOPNOTSUPP", rc,
					      strerror(rc));
				}
				printf("%s: RC QP %u created (send %u, recv %u), destroyed\n", argv[1],
				       qp->qp_num, qa.cap.max_send_wr, qa.cap.max_recv_wr);
				CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
			}
			if (cq)
				ibv_destroy_cq(cq);
			if (pd)
				ibv_dealloc_pd(pd);
		} else if (!strcmp(argv[i], "cq-unsupported")) {
			struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);

			CHECK(!cq && errno == EOPNOTSUPP, "ibv_create_cq: %p, %s (want EOPNOTSUPP)",
			      (void *)cq, strerror(errno));
			if (cq)
				ibv_destroy_cq(cq);
		} else if (!strcmp(argv[i], "cq-too-big")) {
			struct ibv_cq *cq = ibv_create_cq(ctx, 0x7fffffff, NULL, NULL, 0);

			CHECK(!cq, "ibv_create_cq with 2^31 entries succeeded");
			if (cq)
				ibv_destroy_cq(cq);
			else
				printf("%s: oversized CQ refused: %s\n", argv[1], strerror(errno));
		}
	}
	CHECK(!ibv_close_device(ctx), "ibv_close_device");
	ibv_free_device_list(list);
	free(pds);
	return failures ? 1 : 0;
}
