// SPDX-License-Identifier: GPL-2.0

//! The ops table of a transport type (`struct rpc_xprt_ops`) and its trampolines: the
//! transport's own operations where it has them, the RPC client's generic functions for the
//! rest.

use super::{
    addresses::{free_addresses, set_port_strings},
    backchannel,
    request::{Rqst, Task},
    Connect, Transport, Xprt,
};
use crate::{
    bindings,
    error::from_result,
    ffi::{c_int, c_uint, c_ulong, c_ushort, c_void},
    prelude::*,
    str::CStr,
};
use core::{
    fmt,
    marker::PhantomData,
    ptr::{addr_of, addr_of_mut, NonNull},
};

/// The transport's line in `/proc/self/mountstats`, for [`Transport::print_stats`].
///
/// # Invariants
///
/// `seq` is the seq_file being shown, valid for `'a`.
pub struct Stats<'a> {
    seq: *mut bindings::seq_file,
    _show: PhantomData<&'a mut bindings::seq_file>,
}

impl Stats<'_> {
    /// Prints `args` on the line.
    pub fn print(&self, args: fmt::Arguments<'_>) {
        // SAFETY: `seq` is valid (type invariant); `%pA` takes a pointer to a live
        // `fmt::Arguments`.
        unsafe {
            bindings::seq_printf(
                self.seq,
                crate::c_str!("%pA").as_char_ptr(),
                addr_of!(args).cast::<c_void>(),
            )
        }
    }
}

/// The trampolines of transport `T` and its ops table.
pub struct Adapter<T: Transport>(PhantomData<T>);

impl<T: Transport> Adapter<T> {
    /// Every transport of `T` uses this table; unimplemented optional ops are null.
    const OPS: bindings::rpc_xprt_ops = {
        assert!(
            !T::BACKCHANNEL || T::HAS_BC_MAXPAYLOAD,
            "a transport with a backchannel says how large its calls may be"
        );
        bindings::rpc_xprt_ops {
            set_buffer_size: None,
            reserve_xprt: Some(bindings::xprt_reserve_xprt_cong),
            release_xprt: Some(bindings::xprt_release_xprt_cong),
            alloc_slot: Some(bindings::xprt_alloc_slot),
            free_slot: Some(bindings::xprt_free_slot),
            rpcbind: Some(bindings::rpcb_getport_async),
            set_port: Some(Self::set_port),
            connect: Some(Self::connect),
            get_srcaddr: None,
            get_srcport: None,
            buf_alloc: Some(Self::buf_alloc),
            buf_free: Some(Self::buf_free),
            prepare_request: None,
            send_request: Some(Self::send_request),
            abort_send_request: None,
            wait_for_reply_request: Some(bindings::xprt_wait_for_reply_request_def),
            timer: if T::HAS_TIMER {
                Some(Self::timer)
            } else {
                None
            },
            release_request: Some(bindings::xprt_release_rqst_cong),
            close: Some(Self::close),
            destroy: Some(Self::destroy),
            set_connect_timeout: if T::HAS_SET_CONNECT_TIMEOUT {
                Some(Self::set_connect_timeout)
            } else {
                None
            },
            print_stats: Some(Self::print_stats),
            enable_swap: Some(Self::enable_swap),
            disable_swap: Some(Self::disable_swap),
            inject_disconnect: Some(Self::inject_disconnect),
            // The RPC client's pool of backchannel requests (see `backchannel.rs`).
            bc_setup: if T::BACKCHANNEL {
                Some(backchannel::setup)
            } else {
                None
            },
            bc_maxpayload: Some(Self::bc_maxpayload),
            bc_num_slots: Some(Self::bc_num_slots),
            bc_free_rqst: if T::BACKCHANNEL {
                Some(backchannel::free_rqst)
            } else {
                None
            },
            bc_destroy: if T::BACKCHANNEL {
                Some(backchannel::destroy::<T>)
            } else {
                None
            },
        }
    };

    /// [`Self::OPS`], as the transports point to it.
    pub(super) const OPS_REF: &'static bindings::rpc_xprt_ops = &Self::OPS;

    /// `connect`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T` and the task holding its write lock.
    unsafe extern "C" fn connect(xprt: *mut bindings::rpc_xprt, task: *mut bindings::rpc_task) {
        let cookie = xprt.cast::<c_void>();
        // SAFETY: The caller's guarantee.
        if !unsafe { bindings::xprt_lock_connect(xprt, task, cookie) } {
            pr_warn!("sunrpc: connect without the transport's write lock\n");
            // SAFETY: As above; the calls waiting for the connect retry.
            unsafe {
                bindings::xprt_clear_connecting(xprt);
                bindings::xprt_wake_pending_tasks(xprt, EAGAIN.to_errno());
            }
            return;
        }
        // INVARIANT: The write lock is held with the container as cookie.
        let connect = Connect {
            // SAFETY: `xprt` is non-null (a transport of ours).
            ptr: unsafe { NonNull::new_unchecked(xprt.cast::<Xprt<T>>()) },
        };
        // SAFETY: A transport of `T`, live for the call.
        T::connect(unsafe { Xprt::from_raw(xprt) }, connect);
    }

    /// `close`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T`, holding its write lock.
    unsafe extern "C" fn close(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: A transport of `T`, live for the call.
        T::close(unsafe { Xprt::from_raw(xprt) });
        // SAFETY: As above; the write lock serialises these fields. The reconnect delay is
        // left as it is: a close after a failed connect must not undo the backoff, so it is
        // reset only when a connection proves useful (`Xprt::connection_proven`).
        unsafe {
            (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
            bindings::xprt_disconnect_done(xprt);
        }
    }

    /// `destroy`: the last callback of a transport.
    ///
    /// # Safety
    ///
    /// Called once by the RPC client with a transport of `T`, after every other callback.
    unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt) {
        let c = xprt.cast::<Xprt<T>>();
        // SAFETY: The transport is set up (type invariant of `Xprt`) and the RPC client no
        // longer uses it; once its handles are revoked, nothing does. `T`, the lock and the
        // handle are dropped in place once, then the strings, the `rpc_xprt` and the module
        // reference taken in `create` go.
        unsafe {
            let module = (*(*xprt).xprt_class).owner;
            (*c).handle.revoke();
            core::ptr::drop_in_place(addr_of_mut!((*c).transport));
            core::ptr::drop_in_place(addr_of_mut!((*c).receive));
            core::ptr::drop_in_place(addr_of_mut!((*c).handle));
            free_addresses(xprt);
            bindings::xprt_free(xprt);
            bindings::module_put(module);
        }
    }

    /// `buf_alloc`: the call and reply buffers of a request, in one allocation of whole pages
    /// (a compound page) rather than `rpc_malloc`'s slab memory, so that the head and tail of
    /// both `xdr_buf`s can be handed to a device by page reference ([`XdrPages`]).
    ///
    /// [`XdrPages`]: super::request::XdrPages
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a task of a transport of `T` that has a request without a
    /// buffer.
    unsafe extern "C" fn buf_alloc(task: *mut bindings::rpc_task) -> c_int {
        // SAFETY: The caller's guarantee.
        let rqst = unsafe { (*task).tk_rqstp };
        // SAFETY: As above; the request is the task's, ours to set up.
        let (call, reply) = unsafe { ((*rqst).rq_callsize, (*rqst).rq_rcvsize) };
        let Some(size) = call.checked_add(reply) else {
            return -(bindings::ENOMEM as c_int);
        };
        let order = super::request::buffer_order(size);
        // SAFETY: Any order and these flags may be asked for; the result is checked.
        let page = unsafe { bindings::alloc_pages(super::request::BUFFER_GFP, order) };
        if page.is_null() {
            return -(bindings::ENOMEM as c_int);
        }
        // SAFETY: `page` heads `1 << order` pages of the linear map, covering `size` bytes;
        // the request owns them until `buf_free`.
        unsafe {
            let base = bindings::page_address(page);
            (*rqst).rq_buffer = base;
            (*rqst).rq_rbuffer = base.cast::<u8>().add(call).cast();
        }
        0
    }

    /// `buf_free`: the transport ends the device's use of the buffers
    /// ([`Transport::release_buffers`]), then the request's reference to them goes (references
    /// a device mapping still holds keep the pages).
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a task of a transport of `T` whose request's buffer, if
    /// any, `buf_alloc` allocated.
    unsafe extern "C" fn buf_free(task: *mut bindings::rpc_task) {
        // SAFETY: The caller's guarantee.
        let rqst = unsafe { (*task).tk_rqstp };
        // SAFETY: As above.
        let buffer = unsafe { (*rqst).rq_buffer };
        if buffer.is_null() {
            return;
        }
        if T::HAS_RELEASE_BUFFERS {
            // SAFETY: A request of a live transport of `T`, valid for the call.
            if let Some(view) = unsafe { Rqst::from_raw(rqst) } {
                // SAFETY: As above.
                T::release_buffers(unsafe { Xprt::from_raw((*rqst).rq_xprt) }, &view);
            }
        }
        // SAFETY: `buffer` is the first byte of the compound page `buf_alloc` allocated, on
        // which the request holds the allocation's reference.
        unsafe {
            (*rqst).rq_buffer = core::ptr::null_mut();
            (*rqst).rq_rbuffer = core::ptr::null_mut();
            bindings::put_page(bindings::virt_to_page(buffer));
        }
    }

    /// `send_request`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a request of a transport of `T`, holding its write lock.
    unsafe extern "C" fn send_request(rqst: *mut bindings::rpc_rqst) -> c_int {
        from_result(|| {
            // SAFETY: The caller's guarantee.
            let xprt = unsafe { (*rqst).rq_xprt };
            // SAFETY: Valid for the call.
            let view = unsafe { Rqst::from_raw(rqst) }.ok_or(EINVAL)?;
            if !view.is_backchannel_reply() {
                // SAFETY: A live transport.
                if unsafe { bindings::xprt_connected(xprt) } == 0 {
                    return Err(ENOTCONN);
                }
                // SAFETY: A request of this transport, under its write lock.
                if !unsafe { bindings::xprt_request_get_cong(xprt, rqst) } {
                    // No congestion slot: the client waits for one and calls again.
                    return Ok(-(bindings::EBADSLT as c_int));
                }
            }
            // SAFETY: The request is ours to update while it is being sent.
            unsafe { (*rqst).rq_xtime = bindings::ktime_get() };
            // SAFETY: A transport of `T`, live for the call.
            T::send_request(unsafe { Xprt::from_raw(xprt) }, &view)?;
            // SAFETY: As above.
            unsafe {
                (*rqst).rq_xmit_bytes_sent = (*rqst)
                    .rq_xmit_bytes_sent
                    .wrapping_add((*rqst).rq_snd_buf.len as usize)
            };
            Ok(0)
        })
    }

    /// `timer`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T` and a task of it.
    unsafe extern "C" fn timer(xprt: *mut bindings::rpc_xprt, task: *mut bindings::rpc_task) {
        // SAFETY: Valid for the call.
        let Some(task) = (unsafe { Task::from_raw(task) }) else {
            return;
        };
        // SAFETY: A transport of `T`, live for the call.
        T::timer(unsafe { Xprt::from_raw(xprt) }, &task);
    }

    /// `set_port`.
    ///
    /// # Safety
    ///
    /// Called by rpcbind with a transport of `T`, once per bind.
    unsafe extern "C" fn set_port(xprt: *mut bindings::rpc_xprt, port: c_ushort) {
        // SAFETY: A live transport; rpcbind serialises binds, as `xprt_rdma_set_port` assumes.
        let ret = unsafe {
            bindings::rpc_set_port(addr_of_mut!((*xprt).addr).cast(), port);
            set_port_strings(xprt)
        };
        if ret.is_err() {
            pr_warn!("sunrpc: no memory for the strings of port {}\n", port);
        }
        if T::HAS_SET_PORT {
            // SAFETY: A transport of `T`, live for the call.
            T::set_port(unsafe { Xprt::from_raw(xprt) }, port);
        }
    }

    /// `print_stats`: the generic columns as `xprt_rdma_print_stats` prints them, then `T`'s.
    ///
    /// # Safety
    ///
    /// Called with a transport of `T` and the seq_file being shown.
    unsafe extern "C" fn print_stats(xprt: *mut bindings::rpc_xprt, seq: *mut bindings::seq_file) {
        // INVARIANT: The seq_file of the call.
        let stats = Stats {
            seq,
            _show: PhantomData,
        };
        // SAFETY: A transport of `T`, live for the call.
        let x = unsafe { Xprt::<T>::from_raw(xprt) };
        // SAFETY: As above; statistics are read racily, as the C transports do.
        let (st, last_used, proto) = unsafe {
            let proto =
                (*xprt).address_strings[bindings::rpc_display_format_t_RPC_DISPLAY_PROTO as usize];
            ((*xprt).stat, (*xprt).last_used, CStr::from_char_ptr(proto))
        };
        // `HZ` fits any `unsigned long`.
        let hz = bindings::HZ as c_ulong;
        let idle = if x.is_connected() {
            // SAFETY: `jiffies` is always readable.
            let now = unsafe { core::ptr::read_volatile(addr_of!(bindings::jiffies)) };
            now.wrapping_sub(last_used) / hz
        } else {
            0
        };
        stats.print(format_args!(
            "\txprt:\t{} 0 {} {} {} {} {} {} {} {} {}",
            proto.to_str().unwrap_or("?"),
            st.bind_count,
            st.connect_count,
            st.connect_time / hz,
            idle,
            st.sends,
            st.recvs,
            st.bad_xids,
            st.req_u,
            st.bklog_u
        ));
        if T::HAS_PRINT_STATS {
            T::print_stats(x, &stats);
        }
        stats.print(format_args!("\n"));
    }

    /// `enable_swap`: swapping over these transports is not supported.
    extern "C" fn enable_swap(_xprt: *mut bindings::rpc_xprt) -> c_int {
        EINVAL.to_errno()
    }

    /// `disable_swap`.
    extern "C" fn disable_swap(_xprt: *mut bindings::rpc_xprt) {}

    /// `inject_disconnect`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T`.
    unsafe extern "C" fn inject_disconnect(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: A transport of `T`, live for the call.
        let x = unsafe { Xprt::<T>::from_raw(xprt) };
        if T::HAS_INJECT_DISCONNECT {
            T::inject_disconnect(x);
        } else {
            x.force_disconnect();
        }
    }

    /// `set_connect_timeout`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T`.
    unsafe extern "C" fn set_connect_timeout(
        xprt: *mut bindings::rpc_xprt,
        connect: c_ulong,
        reconnect: c_ulong,
    ) {
        // SAFETY: A transport of `T`, live for the call.
        T::set_connect_timeout(unsafe { Xprt::from_raw(xprt) }, connect, reconnect);
    }

    /// `bc_maxpayload`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T`, under `rcu_read_lock`.
    unsafe extern "C" fn bc_maxpayload(xprt: *mut bindings::rpc_xprt) -> usize {
        // SAFETY: A transport of `T`, live for the call.
        T::bc_maxpayload(unsafe { Xprt::from_raw(xprt) })
    }

    /// `bc_num_slots`.
    ///
    /// # Safety
    ///
    /// Called by the RPC client with a transport of `T`, under `rcu_read_lock`.
    unsafe extern "C" fn bc_num_slots(xprt: *mut bindings::rpc_xprt) -> c_uint {
        // SAFETY: A transport of `T`, live for the call.
        T::bc_num_slots(unsafe { Xprt::from_raw(xprt) })
    }
}
