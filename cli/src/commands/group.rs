//! `herd group`: add, set, list and remove job groups.

use herd_persistence::Home;
use herd_protocol::methods::{GroupAdd, GroupList, GroupRm, GroupSet};
use herd_protocol::params::{GroupParams, NoParams};
use serde_json::Value;

use crate::args::{GroupArgs, GroupCommand};
use crate::client::{Client, answer_of};
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
                .send_typed::<GroupAdd>(&GroupParams {
                    name: a.name.clone(),
                    parallel: Some(a.parallel),
                })
                .await?;
            done(
                &answer,
                a.json,
                &format!("group {} added: at most {} at once", a.name, a.parallel),
            )?;
        }
        GroupCommand::Set(a) => {
            let answer = client
                .send_typed::<GroupSet>(&GroupParams {
                    name: a.name.clone(),
                    parallel: Some(a.parallel),
                })
                .await?;
            done(
                &answer,
                a.json,
                &format!("group {}: at most {} at once", a.name, a.parallel),
            )?;
        }
        GroupCommand::Rm(a) => {
            let answer = client
                .send_typed::<GroupRm>(&GroupParams {
                    name: a.name.clone(),
                    parallel: None,
                })
                .await?;
            done(&answer, a.json, &format!("group {} removed", a.name))?;
        }
        GroupCommand::List(flag) => {
            let answer = client.send_typed::<GroupList>(&NoParams {}).await?;
            if flag.json {
                output::json_line(&answer)?;
            } else {
                print_list(&answer_of::<GroupList>(answer)?)?;
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

fn print_list(answer: &herd_protocol::answers::GroupList) -> std::io::Result<()> {
    let mut lines = vec![format!(
        "{:<32} {:>8} {:>8} {:>8}",
        "GROUP", "PARALLEL", "RUNNING", "QUEUED"
    )];
    for g in &answer.groups {
        let parallel = g.parallel.map_or_else(|| "-".to_owned(), |p| p.to_string());
        lines.push(format!(
            "{:<32} {:>8} {:>8} {:>8}",
            output::visible(&g.name),
            parallel,
            g.running,
            g.queued,
        ));
    }
    output::line(&lines.join("\n"))
}
