// SPDX-License-Identifier: GPL-2.0

#include <linux/highmem.h>
#include <linux/sunrpc/addr.h>
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
