// SPDX-License-Identifier: GPL-2.0
/*
 * read-sges: an RDMA Read into several local buffers (a scatter list of 3 SGEs, in 2 memory
 * regions) over rdma_cm, checked byte for byte.
 *
 *   read-sges server ADDR PORT        exposes 12000 patterned bytes for remote read
 *   read-sges client ADDR PORT SRC    reads them into 5000 + 4000 + 3000 bytes of local buffers
 *
 * The server gives its buffer's address and rkey as private data of the accept. The client
 * posts one Read with the three SGEs, waits for its completion (byte_len 12000), compares every
 * byte, tells the server it is done with a Send and disconnects. Exits 0 when all held, 1
 * otherwise, printing what happened.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm-tool.h"

#define TOTAL 12000

struct offer {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

static unsigned char pattern(int i)
{
	return (unsigned char)(i * 7 + i / 251);
}

static int server(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_cm_id *listen_id, *id;
	static unsigned char buf[TOTAL];
	char done[8];
	struct ibv_wc wc;
	int i;

	for (i = 0; i < TOTAL; i++)
		buf[i] = pattern(i);
	if (rdma_create_ep(&listen_id, res, NULL, &qi) || rdma_listen(listen_id, 1))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_request(listen_id, &id))
		die("rdma_get_request");
	struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, TOTAL, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *dmr = rdma_reg_msgs(id, done, sizeof(done));

	if (!mr || !dmr)
		die("registering");
	if (rdma_post_recv(id, NULL, done, sizeof(done), dmr))
		die("rdma_post_recv");
	struct offer o = { (uintptr_t)buf, mr->rkey, TOTAL };
	struct rdma_conn_param cp = { .private_data = &o, .private_data_len = sizeof(o),
				      .responder_resources = 1, .initiator_depth = 1 };

	if (rdma_accept(id, &cp))
		die("rdma_accept");
	if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status)
		die("the client's done");
	/* The client disconnects now. */
	cm_tool_passive_close(id, 5000);
	ibv_dereg_mr(mr);
	rdma_dereg_mr(dmr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	return 0;
}

static int client(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 2, .max_send_sge = 3, .max_recv_sge = 1 },
	};
	static unsigned char a[5000 + 3000], b[4000];
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_cm_id *id;
	struct ibv_wc wc;
	int i, failures = 0;

	if (rdma_create_ep(&id, res, NULL, &qi))
		die("rdma_create_ep");
	struct ibv_mr *ma = ibv_reg_mr(id->pd, a, sizeof(a), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(id->pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE);

	if (!ma || !mb)
		die("registering");
	memset(a, 0xee, sizeof(a));
	memset(b, 0xee, sizeof(b));
	if (rdma_connect(id, &cp))
		die("rdma_connect");
	struct offer o;
	const struct rdma_conn_param *got = &id->event->param.conn;

	if (!got->private_data || got->private_data_len < sizeof(o))
		die("the server's offer");
	memcpy(&o, got->private_data, sizeof(o));
	/* 5000 bytes into a, 4000 into b, the last 3000 into a after its first part. */
	struct ibv_sge sges[3] = {
		{ (uintptr_t)a, 5000, ma->lkey },
		{ (uintptr_t)b, 4000, mb->lkey },
		{ (uintptr_t)(a + 5000), 3000, ma->lkey },
	};
	struct ibv_send_wr wr = { .wr_id = 42, .sg_list = sges, .num_sge = 3,
				  .opcode = IBV_WR_RDMA_READ }, *bad;

	wr.wr.rdma.remote_addr = o.addr;
	wr.wr.rdma.rkey = o.rkey;
	if (ibv_post_send(id->qp, &wr, &bad))
		die("posting the Read");
	if (rdma_get_send_comp(id, &wc) <= 0)
		die("the Read's completion");
	if (wc.status || wc.wr_id != 42 || wc.opcode != IBV_WC_RDMA_READ) {
		fprintf(stderr, "FAIL: Read completed with %s (opcode %d)\n",
			ibv_wc_status_str(wc.status), wc.opcode);
		failures++;
	} else {
		for (i = 0; i < TOTAL; i++) {
			unsigned char c = i < 5000 ? a[i] : i < 9000 ? b[i - 5000] : a[i - 4000];

			if (c != pattern(i)) {
				fprintf(stderr, "FAIL: byte %d reads %#x, want %#x\n", i, c, pattern(i));
				failures++;
				break;
			}
		}
		if (!failures)
			printf("Read of %d bytes into 3 SGEs (2 MRs): every byte as sent\n", TOTAL);
	}
	char done[] = "done";
	struct ibv_mr *dm = rdma_reg_msgs(id, done, sizeof(done));

	if (!dm || rdma_post_send(id, NULL, done, sizeof(done), dm, 0) ||
	    rdma_get_send_comp(id, &wc) <= 0 || wc.status)
		die("telling the server");
	rdma_disconnect(id);
	rdma_dereg_mr(dm);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	rdma_destroy_ep(id);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo *res;

	return cm_tool_args(argc, argv, &res) ? server(res) : client(res);
}
