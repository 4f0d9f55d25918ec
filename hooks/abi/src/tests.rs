//! Tests of the panic-catching helper (the rest is exercised through real
//! libraries in herd-hooks' integration tests).

use super::*;

#[test]
fn catch_panic_maps_every_outcome() {
    assert!(matches!(
        catch_panic(|| Ok(None)),
        RResult::ROk(ROption::RNone)
    ));
    match catch_panic(|| Ok(Some("x".to_owned()))) {
        RResult::ROk(ROption::RSome(s)) => assert_eq!(s.as_str(), "x"),
        other => panic!("unexpected {other:?}"),
    }
    match catch_panic(|| Err("bad".to_owned())) {
        RResult::RErr(s) => assert_eq!(s.as_str(), "bad"),
        other => panic!("unexpected {other:?}"),
    }
    match catch_panic(|| panic!("boom")) {
        RResult::RErr(s) => assert!(
            s.as_str().starts_with("panicked: boom at ") && s.as_str().contains("tests.rs:"),
            "{s}"
        ),
        other => panic!("unexpected {other:?}"),
    }
}
