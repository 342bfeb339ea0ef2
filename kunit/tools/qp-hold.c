// SPDX-License-Identifier: GPL-2.0
/*
 * qp-hold: a known transfer over one rdma_cm connection whose QPs then stay, so that what
 * the provider counted for them can be read while they live (`rdma statistic qp show`,
 * `rdma resource show cm_id`).
 *
 *   qp-hold server ADDR PORT        takes 20 Sends of 4096 bytes
 *   qp-hold client ADDR PORT SRC    sends them, then holds the connection
 *
 * The server posts a receive for each of the 20 messages before it accepts (a Send that
 * finds no receive posted would end the connection). The client sends 20 messages of 4096
 * bytes, a pattern each, one at a time (each Send completes before the next is posted); the
 * server checks each byte for byte. Then the client
 * prints "sent" and holds the connection until the file /tmp/qp-hold.go exists (60 s at
 * most), disconnects and ends; the server ends after the DISCONNECTED. Exits 0 when all held,
 * 1 otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm-tool.h"

#define MESSAGES 20
#define SIZE 4096
#define GO "/tmp/qp-hold.go"

static unsigned char pattern(int m, int i)
{
	return (unsigned char)(m * 31 + i * 7 + i / 251);
}

static int server(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = MESSAGES, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rdma_cm_id *listen_id, *id;
	static unsigned char buf[MESSAGES][SIZE];
	struct ibv_wc wc;
	int m, i;

	if (rdma_create_ep(&listen_id, res, NULL, &qi) || rdma_listen(listen_id, 1))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_request(listen_id, &id))
		die("rdma_get_request");
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof(buf));

	if (!mr)
		die("registering");
	for (m = 0; m < MESSAGES; m++)
		if (rdma_post_recv(id, (void *)(uintptr_t)m, buf[m], SIZE, mr))
			die("rdma_post_recv");
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };

	if (rdma_accept(id, &cp))
		die("rdma_accept");
	for (m = 0; m < MESSAGES; m++) {
		if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status || wc.byte_len != SIZE ||
		    wc.wr_id != (uint64_t)m) {
			fprintf(stderr, "FAIL: message %d: %s, %u bytes, receive %llu\n", m,
				ibv_wc_status_str(wc.status), wc.byte_len,
				(unsigned long long)wc.wr_id);
			return 1;
		}
		for (i = 0; i < SIZE; i++) {
			if (buf[m][i] != pattern(m, i)) {
				fprintf(stderr, "FAIL: message %d byte %d\n", m, i);
				return 1;
			}
		}
	}
	printf("received %d messages of %d bytes\n", MESSAGES, SIZE);
	fflush(stdout);
	cm_tool_passive_close(id, 65000);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	return 0;
}

static int client(struct rdma_addrinfo *res)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	static unsigned char buf[SIZE];
	struct rdma_cm_id *id;
	struct ibv_wc wc;
	int m, i;

	if (rdma_create_ep(&id, res, NULL, &qi))
		die("rdma_create_ep");
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, SIZE);

	if (!mr)
		die("registering");
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };

	if (rdma_connect(id, &cp))
		die("rdma_connect");
	for (m = 0; m < MESSAGES; m++) {
		for (i = 0; i < SIZE; i++)
			buf[i] = pattern(m, i);
		if (rdma_post_send(id, NULL, buf, SIZE, mr, 0))
			die("rdma_post_send");
		if (rdma_get_send_comp(id, &wc) <= 0 || wc.status) {
			fprintf(stderr, "FAIL: Send %d: %s\n", m, ibv_wc_status_str(wc.status));
			return 1;
		}
	}
	printf("sent %d messages of %d bytes, qp %u\n", MESSAGES, SIZE, id->qp->qp_num);
	fflush(stdout);
	for (i = 0; i < 600 && access(GO, F_OK); i++)
		usleep(100000);
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
