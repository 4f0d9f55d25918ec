//! The daemon's own answers are herd-protocol's too: `status` (with its
//! containment, restore and log), `scope`, `plugins`, `hosts`, the groups, `clean`,
//! `adopt`, the leased drain's release and ack, `events.ack` and `shutdown`, and the
//! `data` of a `NOT_FOUND` error, each from a real daemon over its socket, read as
//! the protocol's type and name no field the generated schema lacks.

use herd_protocol::answers::{AckAnswer, LeaseAckAnswer, ReleaseAnswer, StatusAnswer};
use herd_protocol::daemon::RestoreSummary;
use herd_protocol::errors::NotFoundData;
use herd_protocol::methods::{
    Adopt, Clean, Drain, DrainAck, DrainRelease, EventsAck, GroupAdd, GroupList, GroupRm, GroupSet,
    Hosts, Plugins, QueueLatency, Resize, Scope, Shutdown, Status,
};
use serde_json::{Value, json};

use crate::support::{Conn, Env, wait_until};
use crate::wire_schema::{assert_known, check};

fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> T {
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("does not read as the protocol's type: {e}: {value}"))
}

/// A leased drain of `owner` that holds events: the answer and its lease.
fn leased_drain(conn: &mut Conn, schema: &Value, owner: &str) -> (Value, u64) {
    let mut found = None;
    wait_until(std::time::Duration::from_secs(20), || {
        let drained = conn.result("drain", json!({"owner": owner, "lease": true}));
        check::<Drain>(schema, &drained);
        found = drained["lease"].as_u64().map(|lease| (drained, lease));
        found.is_some()
    })
    .expect("the completion is drained within 20 s");
    found.expect("a lease was found")
}

#[test]
fn b39_the_daemons_own_answers_and_error_data_read_as_the_protocol_types() {
    let schema = herd_protocol::schema::document();
    let env = Env::new();
    let mut conn = Conn::open(&env, "wire-daemon-test");

    let status = conn.result("status", json!({}));
    check::<Status>(&schema, &status);
    let read: StatusAnswer = typed(&status);
    assert!(
        read.pid > 0
            && !read.containment.kind.is_empty()
            && matches!(read.restore, RestoreSummary::Counts(_)),
        "{status}"
    );
    assert_known(
        &schema,
        "ContainmentReport",
        &status["containment"],
        "status's containment",
    );
    assert_known(
        &schema,
        "RestoreCounts",
        &status["restore"],
        "status's restore",
    );
    assert_known(&schema, "DaemonLogReport", &status["log"], "status's log");
    check::<Scope>(&schema, &conn.result("scope", json!({})));
    check::<Plugins>(&schema, &conn.result("plugins", json!({})));
    check::<Hosts>(&schema, &conn.result("hosts", json!({})));

    check::<GroupAdd>(
        &schema,
        &conn.result("group.add", json!({"name": "wire", "parallel": 2})),
    );
    check::<GroupSet>(
        &schema,
        &conn.result("group.set", json!({"name": "wire", "parallel": 3})),
    );
    let groups = conn.result("group.list", json!({}));
    check::<GroupList>(&schema, &groups);
    for row in groups["groups"].as_array().expect("group.list has rows") {
        assert_known(&schema, "GroupRow", row, "a group row");
    }
    check::<GroupRm>(&schema, &conn.result("group.rm", json!({"name": "wire"})));
    check::<QueueLatency>(&schema, &conn.result("queue.latency", json!({})));

    // A completion, leased, put back, leased again and acknowledged.
    let spawned = conn.result(
        "spawn",
        json!({"command": "exit 0", "owner": "wire", "notify": true}),
    );
    let id = spawned["session_id"].as_str().expect("an id").to_owned();
    conn.result("wait", json!({"id": id, "timeout_seconds": 20}));
    let (_, lease) = leased_drain(&mut conn, &schema, "wire");
    let released = conn.result("drain.release", json!({"lease": lease}));
    check::<DrainRelease>(&schema, &released);
    assert_eq!(typed::<ReleaseAnswer>(&released).released, 1, "{released}");
    let (drained, lease) = leased_drain(&mut conn, &schema, "wire");
    let event_id = drained["events"][0]["event_id"]
        .as_str()
        .expect("an event id")
        .to_owned();
    let acked = conn.result("drain.ack", json!({"lease": lease}));
    check::<DrainAck>(&schema, &acked);
    assert_eq!(typed::<LeaseAckAnswer>(&acked).acknowledged, 1, "{acked}");
    let acked = conn.result("events.ack", json!({"owner": "wire", "ids": [event_id]}));
    check::<EventsAck>(&schema, &acked);
    typed::<AckAnswer>(&acked);

    let running = conn.result("spawn", json!({"command": "sleep 30", "owner": "wire"}));
    let running = running["session_id"].as_str().expect("an id").to_owned();
    check::<Adopt>(&schema, &conn.result("adopt", json!({"id": running})));
    conn.result("kill", json!({"id": running}));
    // A PTY job's resize once it ended: the stdin answer.
    let pty = conn.result(
        "spawn",
        json!({"command": "exit 0", "owner": "wire", "pty": true}),
    );
    let pty = pty["session_id"].as_str().expect("an id").to_owned();
    conn.result("wait", json!({"id": pty, "timeout_seconds": 20}));
    check::<Resize>(
        &schema,
        &conn.result("resize", json!({"id": pty, "rows": 30, "cols": 100})),
    );
    check::<Clean>(&schema, &conn.result("clean", json!({"owner": "wire"})));

    let missing = conn.call("poll", json!({"id": "proc_0123456789ab"}));
    assert_eq!(
        missing["error"]["code"],
        herd_protocol::NOT_FOUND,
        "{missing}"
    );
    typed::<NotFoundData>(&missing["error"]["data"]);

    check::<Shutdown>(&schema, &conn.result("shutdown", json!({})));
}
