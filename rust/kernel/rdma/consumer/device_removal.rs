// SPDX-License-Identifier: GPL-2.0

//! Device removal as a consumer sees it: an `ib_client` through which the RDMA core tells a
//! consumer that a device is going away, and waits until the consumer let go of it.
//!
//! `rdma link del` (or a driver unloading) unregisters a device. The RDMA core first calls the
//! `remove` of every client, newest first, then waits for the last registration reference. A
//! consumer's objects hold such references ([`DeviceRef`]), so unregistration cannot finish
//! before they are gone; but only the objects of a connection that rdma_cm knows of hear about
//! it (`RDMA_CM_EVENT_DEVICE_REMOVAL`). A consumer that registers a [`RemovalClient`] hears of
//! every removal first, in the unregistering task, where it may sleep: [`Registration`]'s
//! `remove` asks each [`DeviceUse`] of the device to let go ([`RemovalHandler`]), refuses new
//! ones with `ENETUNREACH`, and returns once the last one is dropped. This is the C xprtrdma's
//! `rpcrdma_ib_client` with its removal notifications.
//!
//! The users of one client are in a [`DeviceUsers`], a `static` of the consumer's: the core's
//! `remove` callback names only the device, so the callback finds them through the client's
//! type ([`RemovalClient::USERS`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::client::DeviceRef;
use crate::{
    bindings,
    error::{to_result, Result},
    ffi::c_void,
    new_condvar, new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, CondVar, Mutex},
    types::Opaque,
};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicBool, AtomicU8, Ordering},
};

/// What a user of a device does when the device is going away: start letting go of it (close
/// the connection, say) without waiting. Called under the lock of its [`DeviceUsers`]: it must
/// not create or drop a [`DeviceUse`] of the same client.
pub trait RemovalHandler: Send + Sync {
    /// The device this handler's [`DeviceUse`] is on is being removed.
    fn device_removed(&self);
}

/// A consumer that hears of device removals (`struct ib_client`).
pub trait RemovalClient: 'static {
    /// Its name, as the RDMA core lists clients.
    const NAME: &'static CStr;
    /// Its users of devices: a `static` of its own.
    const USERS: &'static DeviceUsers;
}

/// One user of a device. The handler is taken out while the use ends: the user still counts
/// until its handler (and what it refers to, mapped buffers say) is gone.
struct User {
    id: u64,
    device: usize,
    handler: Option<Arc<dyn RemovalHandler>>,
}

/// The users of devices of one client, and the devices being removed. Slots are emptied in
/// place and reused.
struct UsersState {
    users: KVec<Option<User>>,
    /// Devices whose removal is in progress: new users are refused.
    removing: KVec<Option<usize>>,
    /// Whether new users are taken: from the client's registration to the start of its
    /// unregistration, whose removals then see every user.
    accepting: bool,
    next_id: u64,
}

impl UsersState {
    /// The users of `device`.
    fn of(&self, device: usize) -> impl Iterator<Item = &User> {
        self.users
            .iter()
            .flatten()
            .filter(move |u| u.device == device)
    }
}

/// Puts `item` in an empty slot of `slots`, or a new one.
fn put<T>(slots: &mut KVec<Option<T>>, item: T) -> Result {
    match slots.iter_mut().find(|s| s.is_none()) {
        Some(slot) => *slot = Some(item),
        None => slots.push(Some(item), GFP_KERNEL)?,
    }
    Ok(())
}

/// What [`DeviceUsers`] holds once set up.
#[pin_data]
struct Users {
    #[pin]
    state: Mutex<UsersState>,
    /// Notified when a user goes.
    #[pin]
    gone: CondVar,
}

/// Not set up, being set up, set up: [`DeviceUsers::setup`].
const EMPTY: u8 = 0;
const SETTING_UP: u8 = 1;
const READY: u8 = 2;

/// The users of devices of one [`RemovalClient`], and its `ib_client`: a `static`.
///
/// # Examples
///
/// ```ignore
/// static USERS: DeviceUsers = DeviceUsers::new();
/// // impl RemovalClient for MyClient { const USERS: &'static DeviceUsers = &USERS; ... }
/// ```
///
/// # Invariants
///
/// Once `setup` is [`READY`], `users` is initialised and stays so (a `static` is never
/// dropped). `registered` is true while a [`Registration`] holds `client`, which only that
/// registration writes.
pub struct DeviceUsers {
    client: Opaque<bindings::ib_client>,
    users: Opaque<Users>,
    setup: AtomicU8,
    registered: AtomicBool,
}

// SAFETY: `users` is only used once initialised, through its lock; `client` is written by the one
// registration that holds `registered`, before the RDMA core reads it.
unsafe impl Sync for DeviceUsers {}

impl DeviceUsers {
    /// Empty, for a `static`.
    pub const fn new() -> Self {
        Self {
            client: Opaque::uninit(),
            users: Opaque::uninit(),
            setup: AtomicU8::new(EMPTY),
            registered: AtomicBool::new(false),
        }
    }

    /// Initialises the users on first use (a registration's); they live as long as the
    /// `static`.
    fn setup(&'static self) -> Result {
        match self
            .setup
            .compare_exchange(EMPTY, SETTING_UP, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {}
            Err(READY) => return Ok(()),
            Err(_) => return Err(EBUSY),
        }
        let init = try_pin_init!(Users {
            state <- new_mutex!(
                UsersState {
                    users: KVec::new(),
                    removing: KVec::new(),
                    accepting: false,
                    next_id: 0,
                },
                "DeviceUsers::state"
            ),
            gone <- new_condvar!("DeviceUsers::gone"),
        }? Error);
        // SAFETY: The slot is a `static`, so it never moves; `SETTING_UP` makes this the only
        // writer, and no one reads it before `READY`.
        match unsafe { init.__pinned_init(self.users.get()) } {
            Ok(()) => {
                self.setup.store(READY, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                self.setup.store(EMPTY, Ordering::Release);
                Err(e)
            }
        }
    }

    /// The users, once set up.
    fn users(&self) -> Option<&Users> {
        if self.setup.load(Ordering::Acquire) != READY {
            return None;
        }
        // SAFETY: Initialised, and never changed or dropped afterwards (type invariant).
        Some(unsafe { &*self.users.get() })
    }
}

impl Default for DeviceUsers {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered [`RemovalClient`]; unregistered when dropped, which first runs its removal of
/// every device it was told of (and so waits for every [`DeviceUse`]).
///
/// # Invariants
///
/// `T::USERS.client` is registered with the RDMA core until `drop`, and `T::USERS` is set up.
pub struct Registration<T: RemovalClient> {
    _client: PhantomData<T>,
}

impl<T: RemovalClient> Registration<T> {
    /// Registers `T` with the RDMA core; `EBUSY` if it is registered already.
    pub fn new() -> Result<Self> {
        T::USERS.setup()?;
        if T::USERS.registered.swap(true, Ordering::Acquire) {
            return Err(EBUSY);
        }
        // SAFETY: All zeroes is a valid `ib_client` (null pointers and callbacks, counters).
        let mut client: bindings::ib_client = unsafe { core::mem::zeroed() };
        client.name = T::NAME.as_char_ptr();
        client.remove = Some(remove_callback::<T>);
        let ptr = T::USERS.client.get();
        // SAFETY: `registered` makes us the only writer, and the RDMA core does not know the
        // client (never registered, or unregistered by the registration before us). The
        // client lives for ever (a static), the name is static. The core calls `remove`
        // for every device present, as it is added, until the client is unregistered.
        let ret = unsafe {
            ptr.write(client);
            to_result(bindings::ib_register_client(ptr))
        };
        if let Err(e) = ret {
            T::USERS.registered.store(false, Ordering::Release);
            return Err(e);
        }
        if let Some(users) = T::USERS.users() {
            users.state.lock().accepting = true;
        }
        // INVARIANT: Registered, and `setup` succeeded above.
        Ok(Self {
            _client: PhantomData,
        })
    }
}

impl<T: RemovalClient> Drop for Registration<T> {
    fn drop(&mut self) {
        if let Some(users) = T::USERS.users() {
            users.state.lock().accepting = false;
        }
        // SAFETY: Registered (type invariant). Unregistering runs `remove` for every device and
        // waits for callbacks in progress; the core does not use the client afterwards.
        unsafe { bindings::ib_unregister_client(T::USERS.client.get()) };
        // Every removal waited for the users of its device, and none came since: the lists
        // are empty. Their memory goes now: unloading the module frees the `static` without
        // dropping what it holds.
        if let Some(users) = T::USERS.users() {
            let mut state = users.state.lock();
            state.users = KVec::new();
            state.removing = KVec::new();
        }
        T::USERS.registered.store(false, Ordering::Release);
    }
}

/// `remove`: `device` is being unregistered. Tells each user of it to let go, refuses new ones,
/// and returns once none is left.
///
/// # Safety
///
/// Called by the RDMA core for a client registered by a [`Registration`] of `T`.
unsafe extern "C" fn remove_callback<T: RemovalClient>(
    device: *mut bindings::ib_device,
    _client_data: *mut c_void,
) {
    // Set up before the client was registered (type invariant of `Registration`).
    let Some(users) = T::USERS.users() else {
        return;
    };
    let device = device as usize;
    let mut state = users.state.lock();
    // Without room to note the removal, new users are not refused; those that come in the
    // meantime are waited for too, and rdma_cm's own removal event reaches them.
    let noted = put(&mut state.removing, device).is_ok();
    for handler in state.of(device).filter_map(|u| u.handler.as_ref()) {
        handler.device_removed();
    }
    while state.of(device).next().is_some() {
        users.gone.wait(&mut state);
    }
    if noted {
        if let Some(slot) = state.removing.iter_mut().find(|d| **d == Some(device)) {
            *slot = None;
        }
    }
}

/// A use of a device by a user of a [`RemovalClient`]: while it lives, the device's removal
/// tells the user's handler and waits. Drop it once the user holds nothing on the device.
pub struct DeviceUse {
    users: &'static Users,
    id: u64,
}

impl DeviceUse {
    /// Notes that `handler`'s owner uses `device` for client `T`. `ENETUNREACH` if the device
    /// is being removed, `EINVAL` if `T` is not registered (or being unregistered).
    pub fn new<T: RemovalClient>(
        device: &DeviceRef,
        handler: Arc<dyn RemovalHandler>,
    ) -> Result<Self> {
        let users = T::USERS.users().ok_or(EINVAL)?;
        let device = device.as_raw() as usize;
        let mut state = users.state.lock();
        if !state.accepting {
            return Err(EINVAL);
        }
        if state.removing.contains(&Some(device)) {
            return Err(ENETUNREACH);
        }
        let id = state.next_id;
        state.next_id += 1;
        put(
            &mut state.users,
            User {
                id,
                device,
                handler: Some(handler),
            },
        )?;
        Ok(Self { users, id })
    }
}

/// The slot of the user `id`.
fn slot_of(users: &mut KVec<Option<User>>, id: u64) -> Option<&mut Option<User>> {
    users
        .iter_mut()
        .find(|u| u.as_ref().is_some_and(|u| u.id == id))
}

impl Drop for DeviceUse {
    fn drop(&mut self) {
        // The handler goes outside the lock (dropping it may drop what it refers to), and
        // before the use does: a removal waiting for the device's users must not go on while
        // the handler may still hold memory mapped for the device.
        let handler = slot_of(&mut self.users.state.lock().users, self.id)
            .and_then(|u| u.as_mut())
            .and_then(|u| u.handler.take());
        drop(handler);
        let mut state = self.users.state.lock();
        if let Some(slot) = slot_of(&mut state.users, self.id) {
            *slot = None;
        }
        self.users.gone.notify_all();
    }
}
