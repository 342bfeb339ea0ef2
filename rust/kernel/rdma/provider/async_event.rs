// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events a provider raises on its queue pairs and shared receive queues
//! (`struct ib_event`).
//!
//! A consumer learns of what happens to a QP or SRQ outside any work request through the
//! event handler it gave at creation: a QP failed (`IB_EVENT_QP_FATAL`, or
//! `IB_EVENT_QP_ACCESS_ERR` for a protection violation), a QP with an SRQ will
//! take no more receives (`IB_EVENT_QP_LAST_WQE_REACHED`, which `ib_drain_qp` waits for), an
//! SRQ fell below its limit (`IB_EVENT_SRQ_LIMIT_REACHED`). For a process the core's handler
//! queues the event to its asynchronous event file.
//!
//! A provider's queue may outlive the core's object (the provider holds its queues in its own
//! tables and work items), so it raises events through a handle — [`QpEvents`], [`SrqEvents`]
//! — that the object's destruction switches off before the core frees the object, like
//! [`super::completion_queue::CqNotifier`].
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, new_spinlock_bh, prelude::*, sync::Arc, sync::SpinLockBh};

/// An event of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP failed (`IB_EVENT_QP_FATAL`).
    Fatal,
    /// The QP failed over a protection or access violation (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
    /// A QP with a shared receive queue takes no more receives from it
    /// (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
}

impl QpEvent {
    fn raw(self) -> bindings::ib_event_type {
        match self {
            Self::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            Self::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Self::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        }
    }
}

/// The core's object an event handle reports on.
///
/// # Invariants
///
/// Points to a live object while it is inside its handle's lock.
enum Target {
    Qp(*mut bindings::ib_qp),
    Srq(*mut bindings::ib_srq),
}

// SAFETY: The pointers are only used under the handle's lock, from any thread.
unsafe impl Send for Target {}

/// What the handles of one object share with its container.
#[pin_data]
struct EventState {
    #[pin]
    target: SpinLockBh<Option<Target>>,
}

impl EventState {
    fn new(target: Target) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                target <- new_spinlock_bh!(Some(target), "rdma::EventState::target"),
            }),
            GFP_KERNEL,
        )
    }

    /// Calls the object's event handler with `event`, unless the object is gone.
    fn raise(&self, event: bindings::ib_event_type) {
        let guard = self.target.lock();
        // SAFETY: The object is live inside the lock (the invariant); the core set its device,
        // handler and context at creation and does not change them.
        unsafe {
            let (device, element, handler, context) = match *guard {
                Some(Target::Qp(qp)) => (
                    (*qp).device,
                    bindings::ib_event__bindgen_ty_1 { qp },
                    (*qp).event_handler,
                    (*qp).qp_context,
                ),
                Some(Target::Srq(srq)) => (
                    (*srq).device,
                    bindings::ib_event__bindgen_ty_1 { srq },
                    (*srq).event_handler,
                    (*srq).srq_context,
                ),
                None => return,
            };
            let mut e = bindings::ib_event {
                device,
                element,
                event,
            };
            if let Some(handler) = handler {
                handler(&mut e, context);
            }
        }
    }

    fn shut(&self) {
        *self.target.lock() = None;
    }
}

/// Raises the asynchronous events of a queue pair; see the module documentation.
#[derive(Clone)]
pub struct QpEvents(Arc<EventState>);

impl QpEvents {
    /// A handle for `qp`, live until [`QpEvents::shut`].
    pub(crate) fn new(qp: *mut bindings::ib_qp) -> Result<Self> {
        // INVARIANT: `qp` is live until `destroy_qp_callback` calls `shut`.
        Ok(Self(EventState::new(Target::Qp(qp))?))
    }

    /// Tells the consumer of `event`, unless the QP is destroyed.
    pub fn raise(&self, event: QpEvent) {
        self.0.raise(event.raw());
    }

    /// The QP is being destroyed: no events any more.
    pub(crate) fn shut(&self) {
        self.0.shut();
    }
}

/// Raises the asynchronous events of a shared receive queue; see the module documentation.
#[derive(Clone)]
pub struct SrqEvents(Arc<EventState>);

impl SrqEvents {
    /// A handle for `srq`, live until [`SrqEvents::shut`].
    pub(crate) fn new(srq: *mut bindings::ib_srq) -> Result<Self> {
        // INVARIANT: `srq` is live until `destroy_srq_callback` calls `shut`.
        Ok(Self(EventState::new(Target::Srq(srq))?))
    }

    /// Tells the consumer that fewer receives than its limit are posted
    /// (`IB_EVENT_SRQ_LIMIT_REACHED`), unless the SRQ is destroyed.
    pub fn limit_reached(&self) {
        self.0
            .raise(bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    }

    /// The SRQ is being destroyed: no events any more.
    pub(crate) fn shut(&self) {
        self.0.shut();
    }
}
