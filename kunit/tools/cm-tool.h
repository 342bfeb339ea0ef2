/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the rdma_cm test tools share: their command line
 * (`server ADDR PORT` or `client ADDR PORT SRC`, the client bound to the device that has SRC),
 * how they give up, and how the passive side ends a connection its peer closes.
 */
#ifndef CM_TOOL_H
#define CM_TOOL_H

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static inline int die(const char *what)
{
	fprintf(stderr, "FAIL: %s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * Parses the command line into the address to listen on or connect to; returns 1 for the
 * server, 0 for the client. Exits with 2 on a bad command line.
 */
static inline int cm_tool_args(int argc, char **argv, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	int is_server;

	if (argc < 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    argc != (strcmp(argv[1], "server") ? 5 : 4)) {
		fprintf(stderr, "usage: %s server ADDR PORT | client ADDR PORT SRC\n", argv[0]);
		exit(2);
	}
	is_server = !strcmp(argv[1], "server");
	if (is_server) {
		hints.ai_flags = RAI_PASSIVE;
	} else {
		struct rdma_addrinfo src_hints = { .ai_flags = RAI_PASSIVE,
						   .ai_port_space = RDMA_PS_TCP }, *src;

		if (rdma_getaddrinfo(argv[4], NULL, &src_hints, &src))
			die("rdma_getaddrinfo (source)");
		hints.ai_src_addr = src->ai_src_addr;
		hints.ai_src_len = src->ai_src_len;
	}
	if (rdma_getaddrinfo(argv[2], argv[3], &hints, res))
		die("rdma_getaddrinfo");
	return is_server;
}

/*
 * The passive side's end of a connection its peer closes, on a synchronous id (one made by
 * rdma_create_ep or rdma_get_request without an event channel): waits up to `ms` for the
 * peer's DISCONNECTED, and calls rdma_disconnect only if it did not come. librdmacm's
 * rdma_disconnect on a synchronous id waits for the id's next event, and after DISCONNECTED
 * none comes. (The C siw as the passive side does not always report the peer's close, seen
 * with an SRQ: hence the bound.) Prints and returns whether DISCONNECTED came in time.
 */
static inline int cm_tool_passive_close(struct rdma_cm_id *id, int ms)
{
	struct pollfd p = { .fd = id->channel->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int disconnected = 0;

	if (poll(&p, 1, ms) > 0 && !rdma_get_cm_event(id->channel, &ev)) {
		disconnected = ev->event == RDMA_CM_EVENT_DISCONNECTED;
		rdma_ack_cm_event(ev);
	}
	if (!disconnected) {
		printf("no DISCONNECTED within %d s\n", ms / 1000);
		fflush(stdout);
		rdma_disconnect(id);
	}
	return disconnected;
}

#endif
