//! `herd group`: add, set, list and remove job groups (issue 33).

use herd_persistence::Home;
use serde_json::{Value, json};

use crate::args::{GroupArgs, GroupCommand};
use crate::client::Client;
use crate::exit::{Code, Failure};
use crate::output;

/// `herd group`.
pub(crate) async fn group(home: &Home, args: GroupArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if !client.hello.serves("queue") {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "herd group needs a newer daemon: the running one (herd {}) has no groups; run `herd shutdown --keep-jobs` to replace it with this version, then retry",
                client.hello.daemon
            ),
        )
        .into());
    }
    match args.command {
        GroupCommand::Add(a) => {
            let answer = client
                .request("group.add", json!({"name": a.name, "parallel": a.parallel}))
                .await?;
            done(
                &answer,
                a.json,
                &format!("group {} added: at most {} at once", a.name, a.parallel),
            )?;
        }
        GroupCommand::Set(a) => {
            let answer = client
                .request("group.set", json!({"name": a.name, "parallel": a.parallel}))
                .await?;
            done(
                &answer,
                a.json,
                &format!("group {}: at most {} at once", a.name, a.parallel),
            )?;
        }
        GroupCommand::Rm(a) => {
            let answer = client.request("group.rm", json!({"name": a.name})).await?;
            done(&answer, a.json, &format!("group {} removed", a.name))?;
        }
        GroupCommand::List(flag) => {
            let answer = client.request("group.list", json!({})).await?;
            if flag.json {
                output::json_line(&answer)?;
            } else {
                print_list(&answer)?;
            }
        }
    }
    Ok(())
}

fn done(answer: &Value, json: bool, text: &str) -> std::io::Result<()> {
    if json {
        output::json_line(answer)
    } else {
        output::line(text)
    }
}

fn print_list(answer: &Value) -> std::io::Result<()> {
    let mut lines = vec![format!(
        "{:<32} {:>8} {:>8} {:>8}",
        "GROUP", "PARALLEL", "RUNNING", "QUEUED"
    )];
    for g in answer["groups"].as_array().into_iter().flatten() {
        let parallel = g["parallel"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), |p| p.to_string());
        lines.push(format!(
            "{:<32} {:>8} {:>8} {:>8}",
            output::visible(g["name"].as_str().unwrap_or_default()),
            parallel,
            g["running"].as_u64().unwrap_or(0),
            g["queued"].as_u64().unwrap_or(0),
        ));
    }
    output::line(&lines.join("\n"))
}
