// SPDX-License-Identifier: GPL-2.0
/*
 * verbs-churn: a process uses a siw-ABI device the way a long-lived or hostile one can, and the
 * device must keep its counts and survive.
 *
 *   verbs-churn churn DEVICE [COUNT]
 *   verbs-churn sqe-race server ADDR PORT
 *   verbs-churn sqe-race client ADDR PORT SRC [ITERATIONS]
 *
 * churn: creates and destroys CQs (depth 16), then RC QPs (16 send and receive WRs, 1 SGE, no
 * inline data; one PD and two CQs for all), then SRQs (16 WRs, 1 SGE), COUNT times each (by
 * default the device's max_cq, max_qp and max_srq plus 1000 each). A device that kept the
 * count of a destroyed object would refuse creates (ENOMEM) once past its maximum. Then one
 * more CQ, QP and SRQ must still be creatable. Prints the counts, one line per loop with its
 * time, and on a failure the loop, the iteration and the errno.
 *
 * sqe-race: two RC QPs connected through rdma_cm; the server is started first. The server
 * posts 64 receives of 4 KiB and reposts each as it completes, until its QP fails or the peer
 * disconnects. The client (bound to the device that has SRC) posts ITERATIONS (default 2000)
 * signalled 64-byte Sends, at most 8 outstanding, while a second thread keeps rewriting the
 * entries of its send ring (mapped shared with the kernel; found by the first Send's id among
 * the process's mappings of the device file, as bad-sqe does): num_sge 0xff, an unknown opcode,
 * inline data of 0xffffffff bytes, each put back after. Completions may succeed or fail; the
 * first error (which fails the QP) ends the loop, as does a failing ibv_post_send. The client
 * then stops the thread, reaps what completes within 5 s, reads the QP's state, disconnects
 * and destroys everything. Both print their counts. Every wait is bounded (30 s).
 *
 * Exits 0 when all that held, 1 otherwise (with a FAIL: line), 2 on a bad command line. The
 * client also fails when Sends stay without a completion while the QP is still RTS and every
 * ibv_post_send was accepted: the device then lost work it took.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/siw-abi.h>

#include "cm-tool.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MARGIN 1000			/* creates past the device's maximum */
#define DEPTH 16
#define WAIT_MS 30000			/* any wait for the peer or the device */
#define DRAIN_MS 5000			/* reaping what is left after the race */
#define MSG 64				/* bytes per Send */
#define RECVS 64			/* the server's receives */
#define RECV_LEN 4096
#define WINDOW 8			/* the client's Sends outstanding */
#define ITERATIONS 2000
#define MAGIC 0x5157a11dc4a05e01ull	/* the first Send's id: marks the send ring */
#define BAD_OPCODE 0x7f

static void usage(void)
{
	fprintf(stderr, "usage: verbs-churn churn DEVICE [COUNT]\n"
		"       verbs-churn sqe-race server ADDR PORT\n"
		"       verbs-churn sqe-race client ADDR PORT SRC [ITERATIONS]\n");
	exit(2);
}

/* A churn loop's create or destroy failed. */
static void fail(const char *loop, unsigned long i, const char *call)
{
	int e = errno;

	fprintf(stderr, "FAIL: %s loop, iteration %lu: %s: %s (errno %d)\n", loop, i, call,
		strerror(e), e);
	exit(1);
}

/* The errno of a verbs call's return: a positive errno, a negative one, or -1 with errno. */
static int err_of(int ret)
{
	return ret == -1 ? errno : ret < 0 ? -ret : ret;
}

static void check(int ret, const char *what)
{
	if (ret) {
		errno = err_of(ret);
		die(what);
	}
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!list)
		die("ibv_get_device_list");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die("no such device, or it cannot be opened");
	return ctx;
}

static const struct ibv_qp_init_attr churn_qp = {
	.qp_type = IBV_QPT_RC,
	.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1, .max_recv_sge = 1,
		 .max_inline_data = 0 },
};
static const struct ibv_srq_init_attr churn_srq = { .attr = { .max_wr = DEPTH, .max_sge = 1 } };

/* What the objects churned are made with: one PD and two CQs for every QP and SRQ. */
struct churn_env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
};

static void *create_cq(struct churn_env *e)
{
	return ibv_create_cq(e->ctx, DEPTH, NULL, NULL, 0);
}

static int destroy_cq(void *cq)
{
	return ibv_destroy_cq(cq);
}

static void *create_qp(struct churn_env *e)
{
	struct ibv_qp_init_attr qi = churn_qp;

	qi.send_cq = e->scq;
	qi.recv_cq = e->rcq;
	return ibv_create_qp(e->pd, &qi);
}

static int destroy_qp(void *qp)
{
	return ibv_destroy_qp(qp);
}

static void *create_srq(struct churn_env *e)
{
	struct ibv_srq_init_attr si = churn_srq;

	return ibv_create_srq(e->pd, &si);
}

static int destroy_srq(void *srq)
{
	return ibv_destroy_srq(srq);
}

/* A kind of object the churn creates and destroys, with the verbs' names for the messages. */
struct churn_kind {
	const char *name, *create_call, *destroy_call;
	void *(*create)(struct churn_env *e);
	int (*destroy)(void *obj);
};

static const struct churn_kind kinds[] = {
	{ "cq", "ibv_create_cq", "ibv_destroy_cq", create_cq, destroy_cq },
	{ "qp", "ibv_create_qp", "ibv_destroy_qp", create_qp, destroy_qp },
	{ "srq", "ibv_create_srq", "ibv_destroy_srq", create_srq, destroy_srq },
};

/* Creates and destroys `n` objects of kind `k`, one at a time; prints how long it took. */
static void churn_kind(const struct churn_kind *k, struct churn_env *e, unsigned long n)
{
	struct timespec t0;
	unsigned long i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		void *obj = k->create(e);
		int ret;

		if (!obj)
			fail(k->name, i, k->create_call);
		ret = k->destroy(obj);
		if (ret) {
			errno = err_of(ret);
			fail(k->name, i, k->destroy_call);
		}
	}
	printf("%s: %lu created and destroyed in %.1f s\n", k->name, n, since(&t0));
	fflush(stdout);
}

static int churn(const char *name, const char *count)
{
	struct churn_env e = { .ctx = open_named(name) };
	void *last[ARRAY_SIZE(kinds)];
	unsigned long n[ARRAY_SIZE(kinds)];
	struct ibv_device_attr da;
	size_t k;

	check(ibv_query_device(e.ctx, &da), "ibv_query_device");
	if (count) {
		char *end;

		n[0] = strtoul(count, &end, 0);
		if (*end || !n[0])
			usage();
		n[1] = n[2] = n[0];
	} else {
		n[0] = (unsigned long)da.max_cq + MARGIN;
		n[1] = (unsigned long)da.max_qp + MARGIN;
		n[2] = (unsigned long)da.max_srq + MARGIN;
	}
	printf("counts: cq %lu, qp %lu, srq %lu (device max: cq %d, qp %d, srq %d)\n", n[0], n[1],
	       n[2], da.max_cq, da.max_qp, da.max_srq);
	fflush(stdout);

	churn_kind(&kinds[0], &e, n[0]);
	e.pd = ibv_alloc_pd(e.ctx);
	e.scq = create_cq(&e);
	e.rcq = create_cq(&e);
	if (!e.pd || !e.scq || !e.rcq)
		die("the QP loop's PD and CQs");
	for (k = 1; k < ARRAY_SIZE(kinds); k++)
		churn_kind(&kinds[k], &e, n[k]);

	/* Whatever the loops gave back, one more of each must fit, all at once. */
	for (k = 0; k < ARRAY_SIZE(kinds); k++) {
		last[k] = kinds[k].create(&e);
		if (!last[k]) {
			char what[64];
			int err = errno;

			snprintf(what, sizeof(what), "one more %s after the loops", kinds[k].name);
			errno = err;
			die(what);
		}
	}
	for (k = ARRAY_SIZE(kinds); k-- > 0;)
		check(kinds[k].destroy(last[k]), kinds[k].destroy_call);
	printf("after the loops: one more CQ, QP and SRQ created and destroyed\n");
	check(ibv_destroy_cq(e.rcq), "ibv_destroy_cq");
	check(ibv_destroy_cq(e.scq), "ibv_destroy_cq");
	check(ibv_dealloc_pd(e.pd), "ibv_dealloc_pd");
	check(ibv_close_device(e.ctx), "ibv_close_device");
	return 0;
}

/* The next rdma_cm event of `ch`, which must be `want`, acknowledged; the id it is for. */
static struct rdma_cm_id *cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	enum rdma_cm_event_type type;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int status, n = poll(&p, 1, WAIT_MS);

	if (n < 0)
		die("poll");
	if (n == 0) {
		fprintf(stderr, "FAIL: no %s within %d s\n", rdma_event_str(want), WAIT_MS / 1000);
		exit(1);
	}
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	type = ev->event;
	status = ev->status;
	id = ev->id;
	rdma_ack_cm_event(ev);
	if (type != want) {
		fprintf(stderr, "FAIL: %s (status %d), want %s\n", rdma_event_str(type), status,
			rdma_event_str(want));
		exit(1);
	}
	return id;
}

/* Waits up to `ms` for DISCONNECTED, passing over other events; 1 if it came. */
static int cm_disconnected(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	while (poll(&p, 1, ms) > 0 && !rdma_get_cm_event(ch, &ev)) {
		enum rdma_cm_event_type type = ev->event;

		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_DISCONNECTED)
			return 1;
	}
	return 0;
}

/*
 * Up to `max` completions of `cq`, waiting up to `ms` for the first through the CQ's channel;
 * 0 if none came in time. Every event is acknowledged at once.
 */
static int wait_cq(struct ibv_cq *cq, struct ibv_comp_channel *cc, struct ibv_wc *wc, int max,
		   int ms)
{
	struct pollfd p = { .fd = cc->fd, .events = POLLIN };

	for (;;) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n = ibv_poll_cq(cq, max, wc);

		if (n)
			return n > 0 ? n : die("ibv_poll_cq");
		check(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
		/* One that came before the arming raises no event. */
		n = ibv_poll_cq(cq, max, wc);
		if (n)
			return n > 0 ? n : die("ibv_poll_cq");
		n = poll(&p, 1, ms);
		if (n < 0)
			die("poll");
		if (n == 0)
			return 0;
		if (ibv_get_cq_event(cc, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
	}
}

static int server(struct rdma_addrinfo *res)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen_id, *id;
	static char buf[RECVS][RECV_LEN];
	unsigned long received = 0, bytes = 0, errors = 0;
	enum ibv_wc_status first = IBV_WC_SUCCESS;
	const char *ended = NULL;
	int i, disconnected = 0;

	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(listen_id, res->ai_src_addr) || rdma_listen(listen_id, 1))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	id = cm_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_comp_channel *cc = ibv_create_comp_channel(id->verbs);
	struct ibv_cq *cq = cc ? ibv_create_cq(id->verbs, 2 * RECVS, NULL, cc, 0) : NULL;

	if (!pd || !cq)
		die("pd/channel/cq");
	struct ibv_qp_init_attr qi = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qi))
		die("rdma_create_qp");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		die("ibv_reg_mr");
	for (i = 0; i < RECVS; i++) {
		struct ibv_sge sge = { (uintptr_t)buf[i], RECV_LEN, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		check(ibv_post_recv(id->qp, &wr, &bad), "ibv_post_recv");
	}
	if (rdma_accept(id, NULL))
		die("rdma_accept");
	cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED);
	printf("connected\n");
	fflush(stdout);

	/* Receive and repost until the QP fails or the client goes. */
	while (!ended) {
		struct pollfd p[2] = { { .fd = cc->fd, .events = POLLIN },
				       { .fd = ch->fd, .events = POLLIN } };
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);

		if (n == 0) {
			check(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
			n = ibv_poll_cq(cq, 16, wc);
		}
		if (n < 0)
			die("ibv_poll_cq");
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (!errors++)
					first = wc[i].status;
				ended = "its QP failed";
				continue;
			}
			received++;
			bytes += wc[i].byte_len;
			struct ibv_sge sge = { (uintptr_t)buf[wc[i].wr_id], RECV_LEN, mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = wc[i].wr_id, .sg_list = &sge,
						  .num_sge = 1 }, *bad;

			check(ibv_post_recv(id->qp, &wr, &bad), "reposting a receive");
		}
		if (n || ended)
			continue;
		n = poll(p, 2, WAIT_MS);
		if (n < 0)
			die("poll");
		if (n == 0) {
			fprintf(stderr, "FAIL: server: no completion and no disconnect within %d s\n",
				WAIT_MS / 1000);
			exit(1);
		}
		if (p[0].revents) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (ibv_get_cq_event(cc, &ev_cq, &ev_ctx))
				die("ibv_get_cq_event");
			ibv_ack_cq_events(ev_cq, 1);
		}
		if (p[1].revents) {
			struct rdma_cm_event *ev;

			if (rdma_get_cm_event(ch, &ev))
				die("rdma_get_cm_event");
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
				ended = "the client disconnected", disconnected = 1;
			else
				printf("rdma_cm event %s (status %d)\n", rdma_event_str(ev->event),
				       ev->status);
			rdma_ack_cm_event(ev);
		}
	}
	printf("server: %lu receives (%lu bytes), %lu error completions", received, bytes, errors);
	if (errors)
		printf(" (first: %s)", ibv_wc_status_str(first));
	printf("; ended as %s\n", ended);
	/* The connection may be gone already: the disconnect is a courtesy. */
	rdma_disconnect(id);
	if (!disconnected && !cm_disconnected(ch, DRAIN_MS))
		printf("no DISCONNECTED within %d s\n", DRAIN_MS / 1000);
	rdma_destroy_qp(id);
	check(ibv_dereg_mr(mr), "ibv_dereg_mr");
	check(ibv_destroy_cq(cq), "ibv_destroy_cq");
	check(ibv_destroy_comp_channel(cc), "ibv_destroy_comp_channel");
	check(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	if (rdma_destroy_id(id) || rdma_destroy_id(listen_id))
		die("rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* What the rewriting thread works on. */
struct race {
	struct siw_sqe *ring;
	unsigned int entries;
	int stop;
	unsigned long rounds;
};

/* The mapping of the device file whose first entry is the first Send; its length in `*len`. */
static struct siw_sqe *find_ring(void *buf, uint32_t lkey, size_t *len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	struct siw_sqe *found = NULL;
	char line[512];

	if (!f)
		die("/proc/self/maps");
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		char perms[8];

		if (!strstr(line, "uverbs") ||
		    sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3 || perms[0] != 'r' ||
		    end - start < sizeof(struct siw_sqe))
			continue;
		volatile struct siw_sqe *e = (volatile struct siw_sqe *)start;

		/* The CQ's ring may hold the id too (once it completed); not the SGE. */
		if (e->id == MAGIC && e->sge[0].laddr == (uintptr_t)buf && e->sge[0].lkey == lkey) {
			found = (struct siw_sqe *)start;
			*len = end - start;
		}
	}
	fclose(f);
	return found;
}

/* Sets or clears SIW_WQE_INLINE in `*flags`, every other bit as it is when the write lands. */
static void set_inline(uint16_t *flags, int on)
{
	uint16_t old = __atomic_load_n(flags, __ATOMIC_RELAXED), new;

	do {
		new = on ? old | SIW_WQE_INLINE : old & ~SIW_WQE_INLINE;
		if (new == old)
			return;
	} while (!__atomic_compare_exchange_n(flags, &old, new, 0, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
}

/*
 * The rewriting thread. Round after round it makes every slot of the send ring hostile in one
 * way (num_sge 0xff; an unknown opcode; inline data of 0xffffffff bytes), then puts the slots
 * back as the provider wrote them (1 SGE, SIW_OP_SEND, not inline, 64 bytes), all through
 * volatile accesses, racing the kernel that may be reading an entry at that moment.
 *
 * It changes what entries say, never whether they are entries. SIW_WQE_VALID in the flags is
 * the hand-over: the provider sets it when it has written a slot and takes a slot only while
 * it is clear; the kernel clears it when it has taken the entry. Setting it on a free slot
 * would forge an entry and keep the provider from the slot; clearing it would make an entry
 * disappear (no completion, and the kernel would stop at it). So num_sge, opcode and the SGE's
 * length are written alone, and the inline flag by a compare-and-swap of the flags that keeps
 * the VALID bit as it is when the write lands: a write of the provider's or the kernel's in
 * between makes the swap fail and start again from the new value.
 */
static void *rewriter(void *arg)
{
	struct race *r = arg;
	unsigned long round;
	unsigned int i;

	for (round = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); round++) {
		for (int hostile = 1; hostile >= 0; hostile--) {
			for (i = 0; i < r->entries; i++) {
				volatile struct siw_sqe *e = &r->ring[i];

				switch (round % 3) {
				case 0:
					e->num_sge = hostile ? 0xff : 1;
					break;
				case 1:
					e->opcode = hostile ? BAD_OPCODE : SIW_OP_SEND;
					break;
				default:
					if (hostile) {
						e->sge[0].length = 0xffffffff;
						set_inline(&r->ring[i].flags, 1);
					} else {
						set_inline(&r->ring[i].flags, 0);
						e->sge[0].length = MSG;
					}
				}
			}
		}
		sched_yield();
	}
	r->rounds = round;
	return NULL;
}

static const char *qp_state_str(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

/* The client's counts. */
struct sends {
	unsigned long posted, ok, errors, outstanding;
	enum ibv_wc_status first;
	uint64_t first_id;
};

/*
 * Reaps completions into `s`, waiting up to `ms` for one (0: only looks). -1 if none came,
 * 1 if one with an error did, 0 otherwise.
 */
static int reap(struct ibv_cq *cq, struct ibv_comp_channel *cc, struct sends *s, int ms)
{
	struct ibv_wc wc[DEPTH];
	int n = ms ? wait_cq(cq, cc, wc, DEPTH, ms) : ibv_poll_cq(cq, DEPTH, wc), failed = 0;

	if (n < 0)
		die("ibv_poll_cq");
	if (n == 0)
		return -1;
	for (int i = 0; i < n; i++) {
		s->outstanding--;
		if (wc[i].status == IBV_WC_SUCCESS) {
			s->ok++;
			continue;
		}
		if (!s->errors++) {
			s->first = wc[i].status;
			s->first_id = wc[i].wr_id;
		}
		failed = 1;
	}
	return failed;
}

static int client(struct rdma_addrinfo *res, unsigned long iterations)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static char buf[4096];
	struct sends s = { 0 };
	struct race r = { 0 };
	struct rdma_cm_id *id;
	pthread_t thread;
	size_t map_len;
	int post_err = 0, timed_out = 0;
	unsigned long i;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, res->ai_src_addr, res->ai_dst_addr, 5000))
		die("rdma_resolve_addr");
	cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(id, 5000))
		die("rdma_resolve_route");
	cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_comp_channel *cc = ibv_create_comp_channel(id->verbs);
	struct ibv_cq *cq = cc ? ibv_create_cq(id->verbs, 2 * DEPTH, NULL, cc, 0) : NULL;

	if (!pd || !cq)
		die("pd/channel/cq");
	struct ibv_qp_init_attr qi = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 0 },
	};
	if (rdma_create_qp(id, pd, &qi))
		die("rdma_create_qp");
	memset(buf, 0x5a, sizeof(buf));
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		die("ibv_reg_mr");
	if (rdma_connect(id, NULL))
		die("rdma_connect");
	cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED);

	/*
	 * The first Send lands in slot 0 of the ring. The kernel clears only its flags when it
	 * takes it, so the ring is found by its id and SGE whether or not it went already.
	 */
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = MAGIC, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	check(ibv_post_send(id->qp, &wr, &bad), "the first Send");
	s.posted = s.outstanding = 1;
	r.ring = find_ring(buf, mr->lkey, &map_len);
	if (!r.ring) {
		fprintf(stderr, "FAIL: no mapping of the device file starts with the first Send\n");
		exit(1);
	}
	/* The device reports the ring's slots (the siw ABI's num_sqe) as max_send_wr. */
	r.entries = qi.cap.max_send_wr;
	if (!r.entries || r.entries * sizeof(struct siw_sqe) > map_len) {
		fprintf(stderr, "FAIL: %u send queue entries do not fit the ring's %zu bytes\n",
			r.entries, map_len);
		exit(1);
	}
	printf("send ring: %u entries at %p (a mapping of %zu bytes)\n", r.entries,
	       (void *)r.ring, map_len);
	fflush(stdout);
	errno = pthread_create(&thread, NULL, rewriter, &r);
	if (errno)
		die("pthread_create");

	for (i = 0; i < iterations; i++) {
		int got, full;

		/* Looks each time; waits while WINDOW Sends are outstanding. */
		do {
			full = s.outstanding >= WINDOW;
			got = reap(cq, cc, &s, full ? WAIT_MS : 0);
		} while (got == 0 && s.outstanding >= WINDOW);
		if (got > 0)
			break;
		if (got < 0 && full) {
			timed_out = 1;
			break;
		}
		wr.wr_id = i + 1;
		post_err = ibv_post_send(id->qp, &wr, &bad);
		if (post_err) {
			post_err = err_of(post_err);
			break;
		}
		s.posted++;
		s.outstanding++;
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	errno = pthread_join(thread, NULL);
	if (errno)
		die("pthread_join");

	/* After an error the QP flushes the rest; what never comes is reported below. */
	while (s.outstanding && reap(cq, cc, &s, DRAIN_MS) >= 0)
		;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	check(ibv_query_qp(id->qp, &attr, IBV_QP_STATE, &init), "ibv_query_qp");
	printf("client: Sends posted: %lu (of %lu iterations)\n", s.posted, iterations);
	printf("client: completed successfully: %lu\n", s.ok);
	printf("client: completed with an error: %lu", s.errors);
	if (s.errors)
		printf(" (first: %s, wr_id %llu)", ibv_wc_status_str(s.first),
		       (unsigned long long)s.first_id);
	printf("\n");
	printf("client: ibv_post_send failed: %s\n", post_err ? strerror(post_err) : "no");
	printf("client: %lu rewriting rounds over %u entries\n", r.rounds, r.entries);
	printf("client: QP state after the race: %s\n", qp_state_str(attr.qp_state));
	if (s.outstanding)
		printf("client: %lu Sends without a completion%s\n", s.outstanding,
		       timed_out ? " (none came for the last wait of the loop)" : "");
	fflush(stdout);
	if (s.outstanding && attr.qp_state == IBV_QPS_RTS && !post_err) {
		fprintf(stderr, "FAIL: %lu Sends the device took never completed, its QP in RTS\n",
			s.outstanding);
		exit(1);
	}

	/* The connection may be gone already: the disconnect is a courtesy. */
	rdma_disconnect(id);
	if (!cm_disconnected(ch, DRAIN_MS))
		printf("no DISCONNECTED within %d s\n", DRAIN_MS / 1000);
	rdma_destroy_qp(id);
	check(ibv_dereg_mr(mr), "ibv_dereg_mr");
	check(ibv_destroy_cq(cq), "ibv_destroy_cq");
	check(ibv_destroy_comp_channel(cc), "ibv_destroy_comp_channel");
	check(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	if (rdma_destroy_id(id))
		die("rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* `sqe-race server ADDR PORT` or `sqe-race client ADDR PORT SRC [ITERATIONS]`. */
static int sqe_race(int argc, char **argv)
{
	unsigned long iterations = ITERATIONS;
	struct rdma_addrinfo *res;
	int ret;

	if (argc < 2 || !(!strcmp(argv[1], "server") ? argc == 4 :
			  !strcmp(argv[1], "client") && (argc == 5 || argc == 6)))
		usage();
	if (argc == 6) {
		char *end;

		iterations = strtoul(argv[5], &end, 0);
		if (*end || !iterations)
			usage();
		argc--;
	}
	ret = cm_tool_args(argc, argv, &res) ? server(res) : client(res, iterations);
	rdma_freeaddrinfo(res);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "churn"))
		return churn(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc >= 2 && !strcmp(argv[1], "sqe-race"))
		return sqe_race(argc - 1, argv + 1);
	usage();
	return 2;
}
