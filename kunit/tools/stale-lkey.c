// SPDX-License-Identifier: GPL-2.0
/*
 * stale-lkey: a Send through a local key that was deregistered must fail, also right after the
 * key was used (a device may remember the region it used last) and with the same memory
 * registered again under a new key.
 *
 *   stale-lkey server ADDR PORT        takes the client's first Send
 *   stale-lkey client ADDR PORT SRC    sends through MR A, deregisters A, registers the same
 *                                      buffer as MR B, then sends through A's old key
 *
 * The client's first Send must complete with success and the server must receive its bytes;
 * the second must complete with a local protection error, as with the C siw, and must not
 * reach the server. Exits 0 when all held, 1 otherwise, printing what happened.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm-tool.h"

#define LEN 16

static int server(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_cm_id *listen_id, *id;
	static char buf[2][LEN];
	struct ibv_wc wc;
	int failures = 0;

	if (rdma_create_ep(&listen_id, res, NULL, &qi) || rdma_listen(listen_id, 1))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_request(listen_id, &id))
		die("rdma_get_request");
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof(buf));

	if (!mr || rdma_post_recv(id, NULL, buf[0], LEN, mr) ||
	    rdma_post_recv(id, NULL, buf[1], LEN, mr))
		die("posting receives");
	if (rdma_accept(id, NULL))
		die("rdma_accept");
	if (rdma_get_recv_comp(id, &wc) <= 0)
		die("the first Send");
	if (wc.status || wc.byte_len != LEN || strcmp(buf[0], "first send")) {
		fprintf(stderr, "FAIL: first receive: %s, %u bytes, \"%.*s\"\n",
			ibv_wc_status_str(wc.status), wc.byte_len, LEN, buf[0]);
		failures++;
	}
	/* The second Send must not arrive: the second receive is flushed when the client goes. */
	if (rdma_get_recv_comp(id, &wc) > 0 && wc.status == IBV_WC_SUCCESS) {
		fprintf(stderr, "FAIL: the Send through a stale key arrived: \"%.*s\"\n", LEN,
			buf[1]);
		failures++;
	}
	if (!failures)
		printf("server: first Send received, the stale one not\n");
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	return failures ? 1 : 0;
}

static int send_through(struct rdma_cm_id *id, char *buf, uint32_t lkey, struct ibv_wc *wc)
{
	struct ibv_sge sge = { (uintptr_t)buf, LEN, lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ibv_post_send(id->qp, &wr, &bad))
		return -1;
	return rdma_get_send_comp(id, wc) > 0 ? 0 : -1;
}

static int client(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	static char buf[LEN] = "first send";
	struct ibv_wc wc;
	struct rdma_cm_id *id;
	int failures = 0;

	if (rdma_create_ep(&id, res, NULL, &qi))
		die("rdma_create_ep");
	struct ibv_mr *a = ibv_reg_mr(id->pd, buf, LEN, 0);

	if (!a)
		die("registering A");
	if (rdma_connect(id, NULL))
		die("rdma_connect");
	if (send_through(id, buf, a->lkey, &wc))
		die("the first Send");
	if (wc.status) {
		fprintf(stderr, "FAIL: first Send: %s\n", ibv_wc_status_str(wc.status));
		failures++;
	}
	uint32_t stale = a->lkey;

	if (ibv_dereg_mr(a))
		die("deregistering A");
	struct ibv_mr *b = ibv_reg_mr(id->pd, buf, LEN, 0);

	if (!b)
		die("registering B");
	strcpy(buf, "stale key");
	if (send_through(id, buf, stale, &wc))
		die("the Send through the stale key");
	if (wc.status != IBV_WC_LOC_PROT_ERR) {
		fprintf(stderr, "FAIL: a Send through deregistered key %#x (B is %#x): %s\n",
			stale, b->lkey, ibv_wc_status_str(wc.status));
		failures++;
	} else {
		printf("client: Send through deregistered key %#x (B is %#x): %s\n", stale,
		       b->lkey, ibv_wc_status_str(wc.status));
	}
	rdma_disconnect(id);
	ibv_dereg_mr(b);
	rdma_destroy_ep(id);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo *res;

	return cm_tool_args(argc, argv, &res) ? server(res) : client(res);
}
