//! Unit tests of the handoff refusals' wording (B25) and the child table.

use super::*;

#[test]
fn b25_refusals_say_what_to_do() {
    let cap = HandoffError::CapReached {
        child: "sa-1".to_owned(),
    };
    assert_eq!(
        cap.to_string(),
        "handoff cap reached (3 per child agent); wait on or kill the rest yourself"
    );
    let not_owned = HandoffError::NotRunningOwned {
        id: SessionId::from_test("proc_000000000001"),
    };
    assert!(
        not_owned
            .to_string()
            .starts_with("cannot hand off proc_000000000001: not a running process you own"),
        "{not_owned}"
    );
    let not_child = HandoffError::NotAChild {
        agent: "main".to_owned(),
    };
    assert!(
        not_child.to_string().contains("main is not one"),
        "{not_child}"
    );
}

#[test]
fn b26_children_are_known_by_owner_id() {
    let agents = Agents::default();
    assert!(!agents.is_child("sa-1"));
    let main = AgentIdentity {
        owner_task_id: "main".to_owned(),
        task_id: "main".to_owned(),
        session_key: None,
    };
    agents.register("sa-1", main.clone(), true);
    // An owner that only hands sessions over is no subagent.
    agents.register("person", main, false);
    assert!(!agents.is_child("person"));
    assert!(agents.is_child("sa-1"));
    assert!(!agents.is_child("main"));
}
