// SPDX-License-Identifier: GPL-2.0

//! The QP events: their kernel values, and which one each TERMINATE error calls for.

use rsiw_proto::proto::qp_event::EventKind;
use rsiw_proto::proto::terminate::{Layer, ALL_TERM_ERRORS};

#[test]
fn event_values_are_the_kernels() {
    assert_eq!(EventKind::Fatal.raw(), 1);
    assert_eq!(EventKind::RequestError.raw(), 2);
    assert_eq!(EventKind::AccessError.raw(), 3);
}

#[test]
fn protection_errors_are_access_errors_and_the_rest_fatal() {
    for error in ALL_TERM_ERRORS {
        let protection =
            matches!(error.triple(), (_, 1, _)) && !matches!(error.layer(), Layer::Llp);
        let want = if protection {
            EventKind::AccessError
        } else {
            EventKind::Fatal
        };
        assert_eq!(EventKind::for_term_error(error), want, "{error:?}");
    }
}
