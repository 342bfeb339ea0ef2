// SPDX-License-Identifier: GPL-2.0

//! debugfs: directories, and read-only files whose text a Rust value writes.
//!
//! A driver shows its objects' state under `/sys/kernel/debug` for people debugging it: one
//! file per object, read with `cat`, in the `seq_file` style (`single_open`: the whole text is
//! written by one call, and written again with a larger buffer if it did not fit).
//!
//! - A [`Dir`] is a directory; it is removed, with whatever is left in it, once the last
//!   [`Dir`] handle to it and the last entry created in it are dropped (an entry keeps its
//!   directory).
//! - A [`File`] is a file whose text is the [`Show`] of a value it owns, an [`Arc<T>`]; it is
//!   removed when dropped, and only then does it give its reference to the value up. The
//!   debugfs core makes that sound: `debugfs_remove` waits for every read in flight (the
//!   file's "active users"), and a read that starts afterwards fails with `EIO` without
//!   calling us.
//! - A [`DirSlot`] is a `static` that holds a module's top directory, for code that has no
//!   other way to reach it (callbacks from a subsystem, with no context of the module's).
//!
//! The `file_operations` of every file is one `static` here, in the kernel image: an open
//! file may be released after its module is gone, and its release (`single_release`) then
//! runs kernel code only. The module's own code (the value's [`Show`]) runs only inside a
//! read, under the debugfs core's protection, so only while the [`File`] exists. (A `File`
//! leaked with `mem::forget` keeps its entry, its value and so its `show`: as with any
//! registration a module leaks, the module must then stay loaded.)
//!
//! Whether debugfs is there is not for a driver to depend on: creation fails with an error
//! (debugfs turned off on the command line, `debugfs=off`, or memory short) that a driver may
//! ignore, its objects working the same without their files. The abstraction itself needs
//! `CONFIG_DEBUG_FS` (the C functions are inline stubs without it).
//!
//! C headers: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h),
//! [`include/linux/seq_file.h`](srctree/include/linux/seq_file.h)

use crate::{
    bindings,
    error::{from_err_ptr, Result},
    ffi::{c_int, c_void},
    new_spinlock,
    prelude::*,
    str::CStr,
    sync::{Arc, SpinLock},
    types::Opaque,
};
use core::{
    fmt,
    marker::PhantomData,
    sync::atomic::{AtomicU8, Ordering},
};

/// What a debugfs [`File`] shows: the text is written anew by every read from its start.
///
/// `show` may run on several threads at once (concurrent readers), while the value is used
/// elsewhere: it reads what it shows the way other threads may read it.
pub trait Show: Send + Sync + 'static {
    /// Writes the text into `m`. An error stops the writing; the text written so far is
    /// discarded if it did not fit (the read retries with a larger buffer), shown otherwise.
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result;
}

/// The text of a debugfs file being written, a `struct seq_file` during its `show`.
///
/// Formatted output goes to it through [`core::fmt::Write`]: `writeln!(m, "credits: {n}")?`.
///
/// # Invariants
///
/// `m` is the `seq_file` of a `show` call in progress, valid for `'a`.
pub struct SeqFile<'a> {
    m: *mut bindings::seq_file,
    _p: PhantomData<&'a mut bindings::seq_file>,
}

impl fmt::Write for SeqFile<'_> {
    /// Appends `s`; an error once the buffer is full (the read then retries with a larger
    /// one, so writing more would be wasted).
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: `m` is the `seq_file` of the `show` in progress (type invariant); `s` is
        // `s.len()` readable bytes.
        let ret = unsafe { bindings::seq_write(self.m, s.as_ptr().cast(), s.len()) };
        if ret == 0 {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

/// A debugfs entry (directory or file) we created, removed when dropped.
///
/// # Invariants
///
/// `dentry` is a debugfs entry from `debugfs_create_dir` or `debugfs_create_file`, not
/// removed before `drop`. `_parent`, if any, is the [`Node`] of the directory it is in, which
/// therefore outlives it (so the entry is not removed with its directory before `drop`).
struct Node {
    dentry: *mut bindings::dentry,
    _parent: Option<Arc<Node>>,
}

// SAFETY: The dentry is only passed to the debugfs functions, which any thread may call.
unsafe impl Send for Node {}
// SAFETY: `&Node` only gives the dentry to `debugfs_create_*` as a parent, which is thread-safe.
unsafe impl Sync for Node {}

impl Node {
    /// The dentry to create entries in.
    fn dentry(&self) -> *mut bindings::dentry {
        self.dentry
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: Our entry, not removed yet (type invariant): it and anything left in it go,
        // once the reads in flight of its files returned. `_parent` is dropped afterwards.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}

/// A debugfs directory. Handles are cheap to clone; the directory is removed once the last
/// handle and the last entry in it are dropped.
///
/// # Examples
///
/// ```ignore
/// use kernel::{c_str, debugfs::{Dir, SeqFile, Show}, sync::Arc};
///
/// struct Counts { hits: core::sync::atomic::AtomicU64 }
/// impl Show for Counts {
///     fn show(&self, m: &mut SeqFile<'_>) -> core::fmt::Result {
///         writeln!(m, "hits: {}", self.hits.load(core::sync::atomic::Ordering::Relaxed))
///     }
/// }
///
/// let dir = Dir::new(c_str!("mydriver"))?;
/// let counts = Arc::new(Counts { hits: Default::default() }, GFP_KERNEL)?;
/// let file = dir.file(c_str!("counts"), counts.clone())?; // /sys/kernel/debug/mydriver/counts
/// ```
#[derive(Clone)]
pub struct Dir {
    node: Arc<Node>,
}

impl Dir {
    /// Creates the directory `name` at the top of debugfs.
    pub fn new(name: &CStr) -> Result<Self> {
        Self::create(name, None)
    }

    /// Creates the directory `name` in this one.
    pub fn subdir(&self, name: &CStr) -> Result<Self> {
        Self::create(name, Some(self.node.clone()))
    }

    fn create(name: &CStr, parent: Option<Arc<Node>>) -> Result<Self> {
        let parent_dentry = parent
            .as_ref()
            .map_or(core::ptr::null_mut(), |p| p.dentry());
        // SAFETY: `name` is NUL-terminated; `parent_dentry` is null (the top of debugfs) or a
        // directory of ours, not removed while `parent` is held (`Node`'s invariant).
        let dentry = from_err_ptr(unsafe {
            bindings::debugfs_create_dir(name.as_char_ptr(), parent_dentry)
        })?;
        if dentry.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: The new directory, in `parent`'s, which the node holds. Should the
        // allocation fail, the node is dropped, which removes the directory.
        let node = Arc::new(
            Node {
                dentry,
                _parent: parent,
            },
            GFP_KERNEL,
        )?;
        Ok(Self { node })
    }

    /// Creates the read-only file `name` in this directory, whose text is `data`'s [`Show`].
    /// The file owns `data` until it is dropped, when it is removed.
    pub fn file<T: Show>(&self, name: &CStr, data: Arc<T>) -> Result<File<T>> {
        let value: *const T = &*data;
        let target = KBox::new(
            Target {
                show: show_value::<T>,
                data: value.cast(),
            },
            GFP_KERNEL,
        )?;
        let private: *const Target = &*target;
        // SAFETY: `name` is NUL-terminated; the parent is our directory, not removed while
        // `self.node` is held. `private` stays valid until the file is removed (the `File`
        // drops `target` after its node, whose drop removes the file and waits for its
        // reads); `FOPS` is a `static`.
        let dentry = from_err_ptr(unsafe {
            bindings::debugfs_create_file(
                name.as_char_ptr(),
                0o444,
                self.node.dentry(),
                private.cast_mut().cast(),
                &FOPS.0,
            )
        })?;
        if dentry.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: The new file, in our directory, whose node the file's node holds.
        Ok(File {
            _node: Node {
                dentry,
                _parent: Some(self.node.clone()),
            },
            _target: target,
            data,
        })
    }
}

/// A read-only debugfs file showing a `T` it owns; removed when dropped.
///
/// # Invariants
///
/// The file's `i_private` is `_target`, whose `data` is `data`'s value and whose `show` is
/// `show_value::<T>`. The fields drop in order: `_node` removes the file and waits for the
/// reads in flight, so `_target` and `data` outlive every call of `T::show` for this file.
pub struct File<T: Show> {
    _node: Node,
    _target: KBox<Target>,
    data: Arc<T>,
}

impl<T: Show> File<T> {
    /// The value the file shows.
    pub fn data(&self) -> &Arc<T> {
        &self.data
    }
}

/// What a file's `i_private` points to: the value and how to show it, without its type (the
/// open and show callbacks are not generic, see the module's documentation).
///
/// # Invariants
///
/// `show` may be called with `data` (and any [`SeqFile`]) while the [`File`] that holds the
/// `Target` exists.
struct Target {
    show: unsafe fn(*const c_void, &mut SeqFile<'_>) -> fmt::Result,
    data: *const c_void,
}

// SAFETY: `data` points to a `T: Show`, which is `Send + Sync`, and is only read through `&T`.
unsafe impl Send for Target {}
// SAFETY: As above.
unsafe impl Sync for Target {}

/// Shows the `T` at `data`.
///
/// # Safety
///
/// `data` points to a `T` that is valid for the duration of the call.
unsafe fn show_value<T: Show>(data: *const c_void, m: &mut SeqFile<'_>) -> fmt::Result {
    // SAFETY: A valid `T` for the call (the function's safety requirement).
    let value = unsafe { &*data.cast::<T>() };
    value.show(m)
}

/// The `file_operations` of every [`File`], with a `Sync` wrapper so that it can be a `static`.
struct Fops(bindings::file_operations);

// SAFETY: Never written; the C side only reads it.
unsafe impl Sync for Fops {}

/// `single_open` with [`show_callback`], the `seq_file` read, seek and release. No owner: all
/// of it is in the kernel image.
static FOPS: Fops = Fops({
    // SAFETY: All zeroes is a valid `file_operations`: no owner, no callbacks.
    let mut fops: bindings::file_operations = unsafe { core::mem::zeroed() };
    fops.open = Some(open_callback);
    fops.read = Some(bindings::seq_read);
    fops.llseek = Some(bindings::seq_lseek);
    fops.release = Some(bindings::single_release);
    fops
});

/// `open` of a [`File`]: a `seq_file` whose `private` is the file's [`Target`].
///
/// # Safety
///
/// Called by the debugfs core's open proxy for a file created with [`FOPS`], which holds the
/// file against removal during the call.
unsafe extern "C" fn open_callback(
    inode: *mut bindings::inode,
    file: *mut bindings::file,
) -> c_int {
    // SAFETY: `inode` and `file` are the file's, valid for the call; its `i_private` is
    // the `Target` of a `File` that still exists (the proxy holds it against removal), to
    // which `single_open` only keeps a pointer.
    unsafe { bindings::single_open(file, Some(show_callback), (*inode).i_private) }
}

/// `show` of a [`File`]'s `seq_file`: the [`Target`]'s value writes the text.
///
/// # Safety
///
/// Called by `seq_read` or `seq_lseek` for a `seq_file` opened by [`open_callback`], inside
/// the debugfs core's read or seek proxy, which holds the file against removal.
unsafe extern "C" fn show_callback(m: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
    // SAFETY: `m` is valid for the call; its `private` is the file's `Target`, valid while the
    // file is not removed, which the proxy around this call holds off (`File`'s invariant).
    let target = unsafe { &*(*m).private.cast::<Target>() };
    // INVARIANT: `m` is the `seq_file` of this call.
    let mut seq = SeqFile { m, _p: PhantomData };
    // An error means the buffer is full, which `seq_read` sees and retries with a larger one;
    // or the value's own, whose partial text is shown.
    // SAFETY: `Target`'s invariant: the `File` exists for the call, as above.
    let _ = unsafe { (target.show)(target.data, &mut seq) };
    0
}

/// [`DirSlot`] is not set up, being set up, set up.
const EMPTY: u8 = 0;
const SETTING_UP: u8 = 1;
const READY: u8 = 2;

/// A `static` that holds a module's top [`Dir`], for code that cannot be handed it.
///
/// # Examples
///
/// ```ignore
/// static ROOT: DirSlot = DirSlot::new();
/// // module init:
/// ROOT.set(Dir::new(c_str!("mydriver"))?)?;
/// // anywhere:
/// if let Some(dir) = ROOT.get() { /* dir.file(...) */ }
/// // module exit:
/// drop(ROOT.take());
/// ```
///
/// # Invariants
///
/// Once `state` is [`READY`], `lock` is initialised and stays so (a `static` is never
/// dropped).
pub struct DirSlot {
    state: AtomicU8,
    lock: Opaque<SpinLock<Option<Dir>>>,
}

// SAFETY: `lock` is only used once initialised, through the lock, and `Dir` is `Send`.
unsafe impl Sync for DirSlot {}

impl DirSlot {
    /// Empty, for a `static`.
    pub const fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            lock: Opaque::uninit(),
        }
    }

    /// The lock, once initialised.
    fn lock(&self) -> Option<&SpinLock<Option<Dir>>> {
        if self.state.load(Ordering::Acquire) != READY {
            return None;
        }
        // SAFETY: Initialised, and never changed or dropped afterwards (type invariant).
        Some(unsafe { &*self.lock.get() })
    }

    /// Puts `dir` in the slot, in place of what it held; `EBUSY` if another thread is putting
    /// the first directory in at the same time.
    pub fn set(&'static self, dir: Dir) -> Result {
        if self
            .state
            .compare_exchange(EMPTY, SETTING_UP, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            let init = new_spinlock!(None, "debugfs::DirSlot");
            // SAFETY: The slot is a `static`, so it never moves; `SETTING_UP` makes this the
            // only writer, and no one reads it before `READY`.
            match unsafe { init.__pinned_init(self.lock.get()) } {
                Ok(()) => {}
                Err(e) => match e {},
            }
            // INVARIANT: Initialised.
            self.state.store(READY, Ordering::Release);
        }
        let lock = self.lock().ok_or(EBUSY)?;
        let old = lock.lock().replace(dir);
        // Removed outside the lock (the removal sleeps).
        drop(old);
        Ok(())
    }

    /// A handle to the directory in the slot, if any.
    pub fn get(&self) -> Option<Dir> {
        self.lock()?.lock().clone()
    }

    /// Takes the directory out: it is removed once the handle returned and every other one,
    /// and every entry in it, are dropped.
    pub fn take(&self) -> Option<Dir> {
        self.lock()?.lock().take()
    }
}

impl Default for DirSlot {
    fn default() -> Self {
        Self::new()
    }
}
