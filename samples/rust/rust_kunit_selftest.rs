// SPDX-License-Identifier: GPL-2.0

//! Self-test of `kernel::kunit::suite`, the Rust KUnit suite facility.
//!
//! Every other suite of the project trusts that a failed check turns into a failed KUnit case.
//! This module proves it twice: in the normal build each check is run against a scratch test
//! and must mark it failed (and a passing one must not); built with
//! `RSIW_DELIBERATE_FAIL=1` it adds a case that really fails, to show the whole pipeline —
//! KUnit, the guest collector and the host runner — goes red.

use kernel::{kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*};

module! {
    type: KunitSelftest,
    name: "rust_kunit_selftest",
    author: "rsiw project",
    description: "Self-test of the Rust KUnit suite facility",
    license: "GPL",
}

struct KunitSelftest;

impl kernel::Module for KunitSelftest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(KunitSelftest)
    }
}

fn passing_checks_pass(test: &mut Test) -> Result {
    let two = 2;
    kunit_expect!(test, two + 2 == 4);
    kunit_expect_eq!(test, [1u8, 2, 3].len(), 3);
    kunit_expect!(test, true, "with a message {}", 42);
    Ok(())
}

fn failed_expect_marks_test_failed(test: &mut Test) -> Result {
    let failed = Test::scratch_fails(|scratch| {
        kunit_expect!(scratch, 2 + 2 == 5);
    });
    kunit_expect!(test, failed, "a false kunit_expect! did not fail its test");
    Ok(())
}

fn failed_expect_eq_marks_test_failed(test: &mut Test) -> Result {
    let failed = Test::scratch_fails(|scratch| {
        kunit_expect_eq!(scratch, 7u32, 8u32);
    });
    kunit_expect!(
        test,
        failed,
        "an unequal kunit_expect_eq! did not fail its test"
    );
    Ok(())
}

fn passing_scratch_stays_green(test: &mut Test) -> Result {
    let failed = Test::scratch_fails(|scratch| {
        kunit_expect_eq!(scratch, 7u32, 7u32);
    });
    kunit_expect!(test, !failed, "a true check failed its test");
    Ok(())
}

fn check_returns_outcome(test: &mut Test) -> Result {
    let mut outcome = true;
    Test::scratch_fails(|scratch| outcome = kunit_expect!(scratch, false));
    kunit_expect!(test, !outcome);
    Ok(())
}

fn error_result_propagates(test: &mut Test) -> Result {
    fn fallible(fail: bool) -> Result<u32> {
        if fail {
            Err(EINVAL)
        } else {
            Ok(5)
        }
    }
    let v = fallible(false)?;
    kunit_expect_eq!(test, v, 5);
    kunit_expect!(test, fallible(true).is_err());
    Ok(())
}

/// Passes, except in the `RSIW_DELIBERATE_FAIL=1` build, where it fails on purpose to show
/// the whole pipeline goes red; that build also leaks an allocation, which the end-of-run
/// kmemleak scan must report.
fn fails_only_when_built_to_fail(test: &mut Test) -> Result {
    let sum = 1 + 1;
    let expected = if cfg!(deliberate_fail) { 3 } else { 2 };
    kunit_expect_eq!(test, sum, expected);
    #[cfg(deliberate_fail)]
    core::mem::forget(KBox::new([0x6bu8; 96], GFP_KERNEL)?);
    Ok(())
}

kernel::kunit_suite!(
    rust_kunit_selftest,
    [
        passing_checks_pass,
        failed_expect_marks_test_failed,
        failed_expect_eq_marks_test_failed,
        passing_scratch_stays_green,
        check_returns_outcome,
        error_result_propagates,
        fails_only_when_built_to_fail
    ]
);
