// SPDX-License-Identifier: GPL-2.0

//! SunRPC (`net/sunrpc`): the kernel's RPC client and server, as a transport sees them.
//!
//! NFS reaches its server through an RPC client, whose transport (TCP, UDP, RPC-over-RDMA)
//! is chosen by netid at mount time from the transport classes modules register; nfsd's
//! listeners are transports of the RPC server. Every symbol of SunRPC is exported GPL-only.
//!
//! Wrapped so far: client transport classes ([`xprt_class`]) and client transports ([`xprt`]);
//! server transport classes ([`svc_xprt_class`]) and server transports ([`svc_xprt`]).
//!
//! C headers: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h),
//! [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h)

pub mod svc_xprt;
pub mod svc_xprt_class;
pub mod xprt;
pub mod xprt_class;
