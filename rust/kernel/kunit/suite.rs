// SPDX-License-Identifier: GPL-2.0

//! KUnit test suites written in Rust.
//!
//! Linux 6.12 lets Rust report a failed assertion to KUnit (its doctests do), but has no way for
//! Rust code to declare a suite of its own. This module fills that gap: [`kunit_suite!`](crate::kunit_suite) builds
//! the same `struct kunit_suite` and `struct kunit_case` table a C `kunit_test_suite()` would,
//! and places a pointer to it in the `.kunit_test_suites` section. KUnit finds it there both in
//! vmlinux (suites run at boot) and in a loadable module (suites run when it is loaded), and the
//! results appear in the console and under `/sys/kernel/debug/kunit/<suite>/results`.
//!
//! A case is a plain function `fn(&mut Test) -> Result`. Checks use [`kunit_expect!`](crate::kunit_expect) and
//! [`kunit_expect_eq!`](crate::kunit_expect_eq), which report a failure to KUnit with file, line, the expression and the
//! values, and return `false` so the case can stop early. Returning `Err` fails the case too, so
//! `?` works on fallible kernel calls. Unlike `kunit_assert!`, nothing here aborts the test
//! thread: a failing case returns normally and its destructors run.
//!
//! # Examples
//!
//! ```ignore
//! use kernel::{kunit::suite::Test, kunit_expect_eq, prelude::*};
//!
//! fn adds_up(test: &mut Test) -> Result {
//!     kunit_expect_eq!(test, 1 + 1, 2);
//!     Ok(())
//! }
//!
//! kernel::kunit_suite!(arith, [adds_up]);
//! ```

use crate::ffi::{c_char, c_void};
use crate::{bindings, error::Error, str::CStr};
use core::{cell::UnsafeCell, fmt};

/// The test KUnit is running, handed to each case.
///
/// # Invariants
///
/// `ptr` points to the `struct kunit` KUnit passed to the running case and stays valid until
/// the case returns; a `Test` is only created for that duration and never escapes it.
pub struct Test {
    ptr: *mut bindings::kunit,
}

/// Where a check was written, as KUnit prints it.
#[doc(hidden)]
pub struct Location {
    /// The source file (`file!()`), NUL-terminated.
    pub file: &'static CStr,
    /// The line (`line!()`).
    pub line: u32,
}

impl Test {
    /// Records the outcome of a check; on failure KUnit marks the case failed and logs `loc`,
    /// `expr` and `detail`. Returns `ok`. Use [`kunit_expect!`](crate::kunit_expect) rather than calling this.
    #[doc(hidden)]
    pub fn check(
        &self,
        ok: bool,
        loc: &Location,
        expr: &'static CStr,
        detail: Option<fmt::Arguments<'_>>,
    ) -> bool {
        if ok {
            return true;
        }
        let kloc = bindings::kunit_loc {
            file: loc.file.as_char_ptr(),
            line: loc.line as i32,
        };
        let assert = bindings::kunit_unary_assert {
            assert: bindings::kunit_assert {},
            condition: expr.as_char_ptr(),
            expected_true: true,
        };
        let (fmt, arg): (*const c_char, *const c_void) = match &detail {
            Some(args) => (
                crate::c_str!("%pA").as_char_ptr(),
                (args as *const fmt::Arguments<'_>).cast(),
            ),
            None => (core::ptr::null(), core::ptr::null()),
        };
        // SAFETY: `self.ptr` is the running test (type invariant). `kloc` and `assert` live on
        // the stack for the whole call and KUnit copies what it prints before returning. The
        // format, when given, is `%pA`, whose one argument is a pointer to a live
        // `fmt::Arguments` (the printk extension for Rust); a null format takes no argument.
        // An expectation (not an assertion) never unwinds out of this call.
        unsafe {
            bindings::__kunit_do_failed_assertion(
                self.ptr,
                &kloc,
                bindings::kunit_assert_type_KUNIT_EXPECTATION,
                &assert.assert,
                Some(bindings::kunit_unary_assert_format),
                fmt,
                arg,
            )
        };
        false
    }
}

impl Test {
    /// Runs `f` against a scratch test of its own and returns whether a check in it failed.
    ///
    /// This lets a suite prove that its checks really fail, without failing itself: the scratch
    /// test's failures are logged but counted nowhere.
    pub fn scratch_fails(f: impl FnOnce(&Test)) -> bool {
        let mut raw = core::mem::MaybeUninit::<bindings::kunit>::zeroed();
        // SAFETY: `raw` is writable memory for a `struct kunit` on this frame, and it does not
        // move before `kunit_cleanup` below; the name is a static C string; KUnit accepts a
        // null log.
        unsafe {
            bindings::kunit_init_test(
                raw.as_mut_ptr(),
                crate::c_str!("scratch").as_char_ptr(),
                core::ptr::null_mut(),
            )
        };
        // INVARIANT: `raw` was initialised above and outlives `test`. `f` only gets a shared
        // reference, so it cannot swap the pointer into a `Test` that outlives this frame.
        let test = Test {
            ptr: raw.as_mut_ptr(),
        };
        f(&test);
        // SAFETY: `raw` is initialised and no check is running on it any more.
        let failed = unsafe { (*raw.as_ptr()).status } == bindings::kunit_status_KUNIT_FAILURE;
        // SAFETY: `raw` is initialised; this releases what the checks attached to it.
        unsafe { bindings::kunit_cleanup(raw.as_mut_ptr()) };
        failed
    }
}

/// A test case: implemented by the types [`kunit_suite!`](crate::kunit_suite) generates for each function.
pub trait Case {
    /// The case's name, as KUnit prints it.
    const NAME: &'static CStr;
    /// Where the suite was declared, reported when a case returns an error.
    const LOCATION: Location;
    /// Runs the case.
    fn run(test: &mut Test) -> Result<(), Error>;
}

/// The `run_case` callback of every Rust case.
///
/// # Safety
///
/// `ptr` must point to a valid `struct kunit` for the duration of the call; KUnit guarantees
/// this when it calls `run_case`.
unsafe extern "C" fn run_case<C: Case>(ptr: *mut bindings::kunit) {
    // INVARIANT: KUnit hands the test it is running, valid until this function returns, and
    // `test` is dropped before that.
    let mut test = Test { ptr };
    if let Err(e) = C::run(&mut test) {
        test.check(
            false,
            &C::LOCATION,
            crate::c_str!("case returned Ok"),
            Some(format_args!("{} returned error {:?}", C::NAME, e)),
        );
    }
}

/// One entry of a suite's case table (a `struct kunit_case`).
///
/// KUnit writes each entry's status and log while it runs the suite, hence the `UnsafeCell`.
#[repr(transparent)]
pub struct CaseEntry(UnsafeCell<bindings::kunit_case>);

// SAFETY: Rust code never reads or writes an entry after building it; only KUnit does, and it
// runs a suite's cases one at a time.
unsafe impl Sync for CaseEntry {}

impl CaseEntry {
    /// The entry for case `C`; `module` names the suite for KUnit's module attribute.
    pub const fn new<C: Case>(module: &'static CStr) -> Self {
        Self(UnsafeCell::new(bindings::kunit_case {
            run_case: Some(run_case::<C>),
            name: C::NAME.as_char_ptr(),
            generate_params: None,
            attr: bindings::kunit_attributes { speed: 0 },
            status: bindings::kunit_status_KUNIT_SUCCESS,
            // KUnit only reads this string.
            module_name: module.as_char_ptr().cast_mut(),
            log: core::ptr::null_mut(),
        }))
    }

    /// The all-zero entry that ends a table.
    pub const fn end() -> Self {
        Self(UnsafeCell::new(bindings::kunit_case {
            run_case: None,
            name: core::ptr::null(),
            generate_params: None,
            attr: bindings::kunit_attributes { speed: 0 },
            status: bindings::kunit_status_KUNIT_SUCCESS,
            module_name: core::ptr::null_mut(),
            log: core::ptr::null_mut(),
        }))
    }
}

/// A suite (a `struct kunit_suite`), built by [`kunit_suite!`](crate::kunit_suite) into a static.
#[repr(transparent)]
pub struct Suite(UnsafeCell<bindings::kunit_suite>);

// SAFETY: Rust code never touches the suite after building it; KUnit runs it from one thread.
unsafe impl Sync for Suite {}

impl Suite {
    /// A suite called `name` (at most 255 bytes, checked at compile time) running `cases`,
    /// which must end with [`CaseEntry::end`] (checked at compile time).
    pub const fn new(name: &'static CStr, cases: &'static [CaseEntry]) -> Self {
        let bytes = name.as_bytes_with_nul();
        assert!(
            bytes.len() <= 256,
            "KUnit suite names are at most 255 bytes"
        );
        assert!(!cases.is_empty(), "a case table ends with CaseEntry::end()");
        let mut cname = [0 as c_char; 256];
        let mut i = 0;
        while i < bytes.len() {
            cname[i] = bytes[i] as c_char;
            i += 1;
        }
        Self(UnsafeCell::new(bindings::kunit_suite {
            name: cname,
            suite_init: None,
            suite_exit: None,
            init: None,
            exit: None,
            // KUnit writes through this pointer; the entries are `UnsafeCell`s, so that is
            // allowed through a shared reference.
            test_cases: cases.as_ptr().cast::<bindings::kunit_case>().cast_mut(),
            attr: bindings::kunit_attributes { speed: 0 },
            status_comment: [0; 256],
            debugfs: core::ptr::null_mut(),
            log: core::ptr::null_mut(),
            suite_init_err: 0,
            is_init: false,
        }))
    }
}

/// The pointer to a suite that KUnit finds in the `.kunit_test_suites` section.
#[repr(transparent)]
pub struct SuiteRef(*const Suite);

// SAFETY: It points to a `'static` `Suite`, which is `Sync`.
unsafe impl Sync for SuiteRef {}

impl SuiteRef {
    /// Refers to `suite`.
    pub const fn new(suite: &'static Suite) -> Self {
        Self(suite)
    }
}

/// Declares a KUnit suite named `$name` whose cases are the functions `$case`, each
/// `fn(&mut Test) -> Result`.
#[macro_export]
macro_rules! kunit_suite {
    ($name:ident, [$($case:ident),+ $(,)?]) => {
        #[allow(non_camel_case_types, unreachable_pub)]
        mod $name {
            use $crate::kunit::suite::{Case, CaseEntry, Location, Suite, SuiteRef, Test};

            $(
                struct $case;
                impl Case for $case {
                    const NAME: &'static $crate::str::CStr = $crate::c_str!(stringify!($case));
                    const LOCATION: Location = Location {
                        file: $crate::c_str!(file!()),
                        line: line!(),
                    };
                    fn run(test: &mut Test) -> Result<(), $crate::error::Error> {
                        super::$case(test)
                    }
                }
            )+

            const COUNT: usize = [$(stringify!($case)),+].len() + 1;
            static CASES: [CaseEntry; COUNT] = [
                $(CaseEntry::new::<$case>($crate::c_str!(stringify!($name))),)+
                CaseEntry::end(),
            ];
            static SUITE: Suite = Suite::new($crate::c_str!(stringify!($name)), &CASES);
            #[used]
            #[link_section = ".kunit_test_suites"]
            static SUITE_REF: SuiteRef = SuiteRef::new(&SUITE);
        }
    };
}

/// Checks that a condition holds in a KUnit case; on failure the case is marked failed and the
/// expression (and an optional formatted message) is logged. Evaluates to the condition.
#[macro_export]
macro_rules! kunit_expect {
    ($test:expr, $cond:expr $(,)?) => {
        $test.check(
            $cond,
            &$crate::kunit::suite::Location { file: $crate::c_str!(file!()), line: line!() },
            $crate::c_str!(stringify!($cond)),
            None,
        )
    };
    ($test:expr, $cond:expr, $($msg:tt)+) => {
        $test.check(
            $cond,
            &$crate::kunit::suite::Location { file: $crate::c_str!(file!()), line: line!() },
            $crate::c_str!(stringify!($cond)),
            Some(format_args!($($msg)+)),
        )
    };
}

/// Checks that two expressions are equal (`PartialEq`) in a KUnit case, logging both values
/// (`Debug`) on failure. Evaluates to whether they were equal.
#[macro_export]
macro_rules! kunit_expect_eq {
    ($test:expr, $left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (left, right) => $test.check(
                *left == *right,
                &$crate::kunit::suite::Location {
                    file: $crate::c_str!(file!()),
                    line: line!(),
                },
                $crate::c_str!(concat!(stringify!($left), " == ", stringify!($right))),
                Some(format_args!("left: {:?}, right: {:?}", left, right)),
            ),
        }
    };
}
