// SPDX-License-Identifier: GPL-2.0

#include <linux/highmem.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/xprt.h>

void rust_helper_xprt_set_bound(struct rpc_xprt *xprt)
{
	xprt_set_bound(xprt);
}

void rust_helper_xprt_set_connected(struct rpc_xprt *xprt)
{
	xprt_set_connected(xprt);
}

int rust_helper_xprt_connected(struct rpc_xprt *xprt)
{
	return xprt_connected(xprt);
}

void rust_helper_xprt_clear_connecting(struct rpc_xprt *xprt)
{
	xprt_clear_connecting(xprt);
}

unsigned short rust_helper_rpc_get_port(const struct sockaddr *sap)
{
	return rpc_get_port(sap);
}

void rust_helper_rpc_set_port(struct sockaddr *sap, const unsigned short port)
{
	rpc_set_port(sap, port);
}

void rust_helper_flush_dcache_page(struct page *page)
{
	flush_dcache_page(page);
}

void rust_helper_svc_xprt_get(struct svc_xprt *xprt)
{
	svc_xprt_get(xprt);
}

void rust_helper_svc_xprt_set_local(struct svc_xprt *xprt,
				    const struct sockaddr *sa, const size_t salen)
{
	svc_xprt_set_local(xprt, sa, salen);
}

void rust_helper_svc_xprt_set_remote(struct svc_xprt *xprt,
				     const struct sockaddr *sa, const size_t salen)
{
	svc_xprt_set_remote(xprt, sa, salen);
}

void rust_helper_svc_xprt_set_flag(struct svc_xprt *xprt, unsigned int nr)
{
	set_bit(nr, &xprt->xpt_flags);
}

void rust_helper_svc_xprt_clear_flag(struct svc_xprt *xprt, unsigned int nr)
{
	clear_bit(nr, &xprt->xpt_flags);
}

void rust_helper_svc_rqst_set_flag(struct svc_rqst *rqstp, unsigned int nr)
{
	set_bit(nr, &rqstp->rq_flags);
}

/* Undoes svc_xprt_init() of a transport that never reached the RPC server. */
void rust_helper_svc_xprt_put_net(struct svc_xprt *xprt)
{
	put_net_track(xprt->xpt_net, &xprt->ns_tracker);
}

bool rust_helper_svc_xprt_test_flag(const struct svc_xprt *xprt, unsigned int nr)
{
	return test_bit(nr, &xprt->xpt_flags);
}
