// SPDX-License-Identifier: GPL-2.0
/*
 * cm-cycles: the whole life of an rdma_cm connection from user space, N times over, so that a
 * device's setup and teardown paths (cm ids, CQs and QPs created and destroyed, the MPA
 * exchange, a graceful close on both sides) run often enough for a use after free or a leak
 * to show under KASAN and kmemleak.
 *
 *   cm-cycles [-g] server ADDR PORT N
 *   cm-cycles [-g] client SERVER_ADDR PORT N [LOCAL_ADDR]
 *
 * Each of the N rounds: the client creates a cm id, resolves the address and the route,
 * creates a CQ and an RC QP (4 send and 4 receive WRs) and connects; the server takes the
 * CONNECT_REQUEST, creates its CQ and QP, posts a receive and accepts; both see ESTABLISHED.
 * The client sends 64 bytes, a pattern of the round, which the server checks byte for byte.
 * The client disconnects, both see DISCONNECTED, and both destroy QP, CQ and cm id. The PD,
 * the MR and the completion channel of each side serve all rounds. The server moves each
 * connection's id to an event channel of its own, so a next CONNECT_REQUEST that comes while
 * it finishes a round waits on the listener's channel.
 *
 * With -g (both sides) the server speaks first and closes first: it sends a greeting of 64
 * bytes, its own pattern of the round, which the client (its receive posted before connecting)
 * checks before it sends; once its greeting has completed and the client's message has come,
 * the server disconnects, and the client disconnects after DISCONNECTED. That is the mode for
 * a C siw server, which otherwise fails a round now and then, the client not at fault:
 * - its passive side (siw_accept) sends the MPA Reply before its QP takes over the socket's
 *   data_ready; FPDUs that arrive in between wait in the socket unseen until more data comes,
 *   so a message sent at once is lost when the client then closes (the receive is flushed);
 * - its transmit fails a Send whose last segment went to TCP when the peer's close comes
 *   before it looked (siw_qp_sq_proc_tx checks tx_suspend before DDP_FLAG_LAST): a greeting
 *   the client received, answered and closed on can complete with LOC_QP_OP_ERR.
 *
 * With LOCAL_ADDR the client binds round r's id to LOCAL_ADDR, port 21000 + (r - 1) % 10000
 * (below the ephemeral range): the side that closes first keeps each connection in TIME_WAIT
 * for a minute, and rdma_cm's random ports would now and then give a round the four-tuple of
 * one of them, whose connect() TCP refuses.
 *
 * Every wait is bounded: 10 s for an event or a completion, 60 s for the server's first
 * CONNECT_REQUEST (the client may start later). A failure prints a FAIL: line naming the side,
 * the round, what was awaited and what came instead (a device removal shows as
 * RDMA_CM_EVENT_DEVICE_REMOVAL). At the end each side prints "cm-cycles: N rounds in X.Y s".
 * Exits 0 when every round held, 1 on the first failure, 2 on a bad command line.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm-tool.h"

#define MSG 64			/* bytes of the round's Send */
#define GREETING 1024		/* where in buf the greeting is sent from and received into */
#define DEPTH 4			/* send and receive WRs of each QP */
#define WAIT_MS 10000		/* any wait for an event or a completion */
#define FIRST_WAIT_MS 60000	/* the server's wait for the first CONNECT_REQUEST */
#define PORT_BASE 21000		/* the client's ports with LOCAL_ADDR */
#define PORTS 10000

static const char *side = "";
static unsigned long round_no;
static int server_first;		/* -g: the server speaks first and closes first */

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void failf(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: %s, round %lu: ", side, round_no);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: cm-cycles [-g] server ADDR PORT N\n"
		"       cm-cycles [-g] client SERVER_ADDR PORT N [LOCAL_ADDR]\n");
	exit(2);
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void nonblocking(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die("fcntl");
}

static struct rdma_event_channel *new_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (!ch)
		die("rdma_create_event_channel");
	nonblocking(ch->fd);
	return ch;
}

/*
 * The next event of `ch` within `ms`. It must be `want`, for `id` (for CONNECT_REQUEST, on
 * `id` as the listener); returned unacknowledged.
 */
static struct rdma_cm_event *cm_next(struct rdma_event_channel *ch, struct rdma_cm_id *id,
				     enum rdma_cm_event_type want, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left = ms - elapsed_ms(&t0);
		int n = poll(&p, 1, left > 0 ? (int)left : 0);

		if (n < 0 && errno != EINTR)
			failf("poll: %s", strerror(errno));
		if (n > 0) {
			if (!rdma_get_cm_event(ch, &ev))
				break;
			if (errno != EAGAIN)
				failf("rdma_get_cm_event: %s", strerror(errno));
		}
		if (elapsed_ms(&t0) >= ms)
			failf("no %s within %d s", rdma_event_str(want), ms / 1000);
	}
	if (ev->event != want)
		failf("waiting for %s, got %s (status %d)", rdma_event_str(want),
		      rdma_event_str(ev->event), ev->status);
	if ((want == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->listen_id : ev->id) != id)
		failf("%s came for another id", rdma_event_str(want));
	return ev;
}

static void cm_expect(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		      enum rdma_cm_event_type want)
{
	rdma_ack_cm_event(cm_next(ch, id, want, WAIT_MS));
}

/* What every round of a side uses: one device, PD, MR and completion channel. */
static struct ibv_context *dev;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_comp_channel *cc;
static unsigned char buf[4096];

static void use_device(struct ibv_context *verbs)
{
	if (!verbs)
		failf("the cm id has no device");
	if (dev) {
		if (verbs != dev)
			failf("the connection is on %s, the earlier ones were on %s",
			      ibv_get_device_name(verbs->device), ibv_get_device_name(dev->device));
		return;
	}
	dev = verbs;
	pd = ibv_alloc_pd(dev);
	if (!pd)
		failf("ibv_alloc_pd: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		failf("ibv_reg_mr: %s", strerror(errno));
	cc = ibv_create_comp_channel(dev);
	if (!cc)
		failf("ibv_create_comp_channel: %s", strerror(errno));
	nonblocking(cc->fd);
}

/* The round's CQ (armed through the shared channel) and QP on `id`. */
static struct ibv_cq *round_qp(struct rdma_cm_id *id)
{
	struct ibv_cq *cq = ibv_create_cq(dev, 2 * DEPTH, NULL, cc, 0);

	if (!cq)
		failf("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr qi = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qi))
		failf("rdma_create_qp: %s", strerror(errno));
	return cq;
}

static void round_destroy(struct rdma_cm_id *id, struct ibv_cq *cq)
{
	rdma_destroy_qp(id);
	if (ibv_destroy_cq(cq))
		failf("ibv_destroy_cq: %s", strerror(errno));
	if (rdma_destroy_id(id))
		failf("rdma_destroy_id: %s", strerror(errno));
}

/*
 * The next completion of `cq` within WAIT_MS, waiting through the completion channel (each
 * event acknowledged at once); it must have succeeded.
 */
static void wc_next(struct ibv_cq *cq, const char *what, struct ibv_wc *wc)
{
	struct pollfd p = { .fd = cc->fd, .events = POLLIN };
	struct timespec t0;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if ((n = ibv_poll_cq(cq, 1, wc)))
			break;
		if (ibv_req_notify_cq(cq, 0))
			failf("ibv_req_notify_cq failed");
		/* One that came before the arming raises no event. */
		if ((n = ibv_poll_cq(cq, 1, wc)))
			break;
		long left = WAIT_MS - elapsed_ms(&t0);

		if (left <= 0)
			failf("no completion of the %s within %d s", what, WAIT_MS / 1000);
		n = poll(&p, 1, (int)left);
		if (n < 0 && errno != EINTR)
			failf("poll: %s", strerror(errno));
		if (n > 0) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (!ibv_get_cq_event(cc, &ev_cq, &ev_ctx))
				ibv_ack_cq_events(ev_cq, 1);
			else if (errno != EAGAIN)
				failf("ibv_get_cq_event: %s", strerror(errno));
		}
	}
	if (n < 0)
		failf("ibv_poll_cq failed (%s)", what);
	if (wc->status != IBV_WC_SUCCESS)
		failf("the %s completed with %s", what, ibv_wc_status_str(wc->status));
}

/* As wc_next, and the completion must be of `opcode`. */
static void wc_expect(struct ibv_cq *cq, enum ibv_wc_opcode opcode, const char *what,
		      struct ibv_wc *wc)
{
	wc_next(cq, what, wc);
	if (wc->opcode != opcode)
		failf("the %s completed with opcode %d", what, wc->opcode);
}

static unsigned char pattern(unsigned long round, int i)
{
	return (unsigned char)(round * 131 + i * 7 + 1);
}

/* The server's greeting of a round: a pattern of its own. */
static unsigned char greeting(unsigned long round, int i)
{
	return (unsigned char)(round * 17 + i * 11 + 3);
}

/* The message of `what` in buf[at..at + MSG], as `pat` makes it for the round. */
static void check_message(const struct ibv_wc *wc, int at, const char *what,
			  unsigned char (*pat)(unsigned long, int))
{
	if (wc->byte_len != MSG)
		failf("the %s has %u bytes, want %d", what, wc->byte_len, MSG);
	for (int i = 0; i < MSG; i++)
		if (buf[at + i] != pat(round_no, i))
			failf("byte %d of the %s is 0x%02x, want 0x%02x", i, what, buf[at + i],
			      pat(round_no, i));
}

/* Posts a signalled Send of buf[at..at + MSG] on `qp`. */
static void post_message(struct ibv_qp *qp, int at, const char *what)
{
	struct ibv_sge sge = { (uintptr_t)(buf + at), MSG, mr->lkey };
	struct ibv_send_wr swr = { .wr_id = round_no, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	if (ibv_post_send(qp, &swr, &bad))
		failf("ibv_post_send failed (%s)", what);
}

/* Posts a receive of up to 2 * MSG bytes into buf[at..]. */
static void post_receive(struct ibv_qp *qp, int at)
{
	struct ibv_sge sge = { (uintptr_t)(buf + at), 2 * MSG, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = round_no, .sg_list = &sge, .num_sge = 1 }, *bad;

	memset(buf + at, 0, 2 * MSG);
	if (ibv_post_recv(qp, &rwr, &bad))
		failf("ibv_post_recv failed");
}

static const struct rdma_conn_param conn_param = {
	.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
};

static void server(const char *addr, const char *port, unsigned long rounds)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
	struct rdma_event_channel *ch, *conn_ch;
	struct rdma_addrinfo *res;
	struct rdma_cm_id *listen_id;
	struct timespec t0;

	side = "server";
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		die("rdma_getaddrinfo");
	ch = new_channel();
	conn_ch = new_channel();
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(listen_id, res->ai_src_addr) || rdma_listen(listen_id, 16))
		die("listen");
	rdma_freeaddrinfo(res);
	printf("cm-cycles: listening\n");
	fflush(stdout);

	for (round_no = 1; round_no <= rounds; round_no++) {
		struct rdma_cm_event *ev = cm_next(ch, listen_id, RDMA_CM_EVENT_CONNECT_REQUEST,
						   round_no == 1 ? FIRST_WAIT_MS : WAIT_MS);
		struct rdma_cm_id *id = ev->id;
		struct ibv_wc wc;

		if (round_no == 1)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		rdma_ack_cm_event(ev);
		if (rdma_migrate_id(id, conn_ch))
			failf("rdma_migrate_id: %s", strerror(errno));
		use_device(id->verbs);
		struct ibv_cq *cq = round_qp(id);

		post_receive(id->qp, 0);
		struct rdma_conn_param cp = conn_param;

		if (rdma_accept(id, &cp))
			failf("rdma_accept: %s", strerror(errno));
		cm_expect(conn_ch, id, RDMA_CM_EVENT_ESTABLISHED);
		if (server_first) {
			for (int i = 0; i < MSG; i++)
				buf[GREETING + i] = greeting(round_no, i);
			post_message(id->qp, GREETING, "greeting");
		}
		/* The greeting's and the receive's completions, in either order. */
		for (int sent = !server_first, received = 0; !sent || !received;) {
			wc_next(cq, sent ? "receive" : "greeting or receive", &wc);
			if (wc.opcode == IBV_WC_RECV && !received) {
				check_message(&wc, 0, "message", pattern);
				received = 1;
			} else if (wc.opcode == IBV_WC_SEND && !sent) {
				sent = 1;
			} else {
				failf("a completion with opcode %d came", wc.opcode);
			}
		}
		if (server_first) {
			if (rdma_disconnect(id))
				failf("rdma_disconnect: %s", strerror(errno));
			cm_expect(conn_ch, id, RDMA_CM_EVENT_DISCONNECTED);
		} else {
			cm_expect(conn_ch, id, RDMA_CM_EVENT_DISCONNECTED);
			/* The peer closed first: the disconnect is a courtesy and may fail. */
			rdma_disconnect(id);
		}
		round_destroy(id, cq);
	}
	printf("cm-cycles: %lu rounds in %.1f s\n", rounds, elapsed_ms(&t0) / 1000.0);
	if (rdma_destroy_id(listen_id))
		die("rdma_destroy_id (listener)");
	if (dev && (ibv_dereg_mr(mr) || ibv_destroy_comp_channel(cc) || ibv_dealloc_pd(pd)))
		die("freeing the MR, channel or PD");
	rdma_destroy_event_channel(conn_ch);
	rdma_destroy_event_channel(ch);
}

static void client(const char *addr, const char *port, unsigned long rounds, const char *local)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *dst, *src = NULL;
	struct rdma_event_channel *ch;
	struct sockaddr_storage from;
	struct timespec t0;

	side = "client";
	if (rdma_getaddrinfo(addr, port, &hints, &dst))
		die("rdma_getaddrinfo");
	if (local) {
		struct rdma_addrinfo src_hints = { .ai_flags = RAI_PASSIVE,
						   .ai_port_space = RDMA_PS_TCP };

		if (rdma_getaddrinfo(local, NULL, &src_hints, &src))
			die("rdma_getaddrinfo (local)");
		if (src->ai_src_len > sizeof(from))
			die("local address too long");
	}
	ch = new_channel();
	clock_gettime(CLOCK_MONOTONIC, &t0);

	for (round_no = 1; round_no <= rounds; round_no++) {
		struct sockaddr *bind_to = NULL;
		struct rdma_cm_id *id;
		struct ibv_wc wc;

		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			failf("rdma_create_id: %s", strerror(errno));
		if (src) {
			uint16_t p = htons(PORT_BASE + (round_no - 1) % PORTS);

			memcpy(&from, src->ai_src_addr, src->ai_src_len);
			if (from.ss_family == AF_INET)
				((struct sockaddr_in *)&from)->sin_port = p;
			else
				((struct sockaddr_in6 *)&from)->sin6_port = p;
			bind_to = (struct sockaddr *)&from;
		}
		if (rdma_resolve_addr(id, bind_to, dst->ai_dst_addr, WAIT_MS / 2))
			failf("rdma_resolve_addr: %s", strerror(errno));
		cm_expect(ch, id, RDMA_CM_EVENT_ADDR_RESOLVED);
		if (rdma_resolve_route(id, WAIT_MS / 2))
			failf("rdma_resolve_route: %s", strerror(errno));
		cm_expect(ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED);
		use_device(id->verbs);
		struct ibv_cq *cq = round_qp(id);

		struct rdma_conn_param cp = conn_param;

		if (server_first)
			post_receive(id->qp, GREETING);
		if (rdma_connect(id, &cp))
			failf("rdma_connect: %s", strerror(errno));
		cm_expect(ch, id, RDMA_CM_EVENT_ESTABLISHED);
		if (server_first) {
			wc_expect(cq, IBV_WC_RECV, "greeting's receive", &wc);
			check_message(&wc, GREETING, "greeting", greeting);
		}
		for (int i = 0; i < MSG; i++)
			buf[i] = pattern(round_no, i);
		post_message(id->qp, 0, "Send");
		wc_expect(cq, IBV_WC_SEND, "Send", &wc);
		if (server_first) {
			cm_expect(ch, id, RDMA_CM_EVENT_DISCONNECTED);
			/* The peer closed first: the disconnect is a courtesy and may fail. */
			rdma_disconnect(id);
		} else {
			if (rdma_disconnect(id))
				failf("rdma_disconnect: %s", strerror(errno));
			cm_expect(ch, id, RDMA_CM_EVENT_DISCONNECTED);
		}
		round_destroy(id, cq);
	}
	printf("cm-cycles: %lu rounds in %.1f s\n", rounds, elapsed_ms(&t0) / 1000.0);
	if (dev && (ibv_dereg_mr(mr) || ibv_destroy_comp_channel(cc) || ibv_dealloc_pd(pd)))
		die("freeing the MR, channel or PD");
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(dst);
	if (src)
		rdma_freeaddrinfo(src);
}

int main(int argc, char **argv)
{
	unsigned long rounds;
	char *end;

	if (argc > 1 && !strcmp(argv[1], "-g")) {
		server_first = 1;
		argc--;
		argv++;
	}
	if (argc < 5)
		usage();
	rounds = strtoul(argv[4], &end, 10);
	if (*end || !rounds)
		usage();
	if (!strcmp(argv[1], "server") && argc == 5)
		server(argv[2], argv[3], rounds);
	else if (!strcmp(argv[1], "client") && argc <= 6)
		client(argv[2], argv[3], rounds, argc == 6 ? argv[5] : NULL);
	else
		usage();
	return 0;
}
