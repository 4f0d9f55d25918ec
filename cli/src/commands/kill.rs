//! `herd kill` and `herd clean`: end sessions' trees; forget finished ones.

use herd_persistence::Home;
use serde_json::json;

use super::ending;
use crate::args::{CleanArgs, KillArgs};
use crate::client::Client;
use crate::exit::{Code, Failure};
use crate::output;

/// `herd kill`: one or several sessions, or every running one of the owner, at
/// once (each tree kill waits its grace, so they run together).
pub(crate) async fn kill(home: &Home, args: KillArgs) -> anyhow::Result<()> {
    let ids = if args.all {
        let owner = args.owner.resolve("cli");
        let mut client = Client::connect(home).await?;
        let listed = client.request("list", json!({"owner": owner})).await?;
        listed["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| row["session_id"].as_str().map(str::to_owned))
            .collect()
    } else {
        args.ids.clone()
    };
    if ids.is_empty() {
        output::err_line("no running sessions to kill");
        return Ok(());
    }
    let answers = futures::future::join_all(ids.iter().map(|id| async move {
        let mut client = Client::connect(home).await?;
        client.request("kill", json!({"id": id})).await
    }))
    .await;
    let several = ids.len() > 1;
    let mut failed = false;
    for (id, answer) in ids.iter().zip(answers) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) if several => {
                output::err_line(&format!("herd: {id}: {err:#}"));
                failed = true;
                continue;
            }
            Err(err) => return Err(err),
        };
        let status = answer["status"].as_str().unwrap_or("unknown").to_owned();
        if args.json && several {
            output::json_line(&answer)?;
        } else if args.json {
            output::json_pretty(&answer)?;
        } else {
            let shown = output::visible(answer["session_id"].as_str().unwrap_or(id)).into_owned();
            match status.as_str() {
                "killed" => output::line(&format!("{shown} killed"))?,
                "already_exited" => {
                    let how = ending(&answer, id)
                        .split_once(' ')
                        .map(|(_, how)| how.to_owned())
                        .unwrap_or_default();
                    output::line(&format!("{shown} had already ended: {how}"))?;
                }
                _ => output::line(&format!(
                    "{shown}: {}",
                    output::visible(answer["error"].as_str().unwrap_or("kill incomplete"))
                ))?,
            }
        }
        failed |= status == "kill_incomplete";
    }
    if failed {
        return Err(Failure::silent(Code::Failed).into());
    }
    Ok(())
}

/// `herd clean`.
pub(crate) async fn clean(home: &Home, args: CleanArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    if !client.hello.serves("clean") {
        return Err(Failure::new(
            Code::Failed,
            "this daemon cannot forget sessions (it predates clean); restart it with `herd shutdown --keep-jobs`",
        )
        .into());
    }
    let owner = (!args.every_owner).then(|| args.owner.resolve("cli"));
    let answer = client
        .request(
            "clean",
            json!({"owner": owner, "older_than_seconds": args.older_than}),
        )
        .await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    let n = answer["forgotten"].as_u64().unwrap_or(0);
    output::line(&if n == 1 {
        "forgot 1 finished session, its log and its receipt".to_owned()
    } else {
        format!("forgot {n} finished sessions, their logs and their receipts")
    })?;
    Ok(())
}
