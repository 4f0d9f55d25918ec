//! `herd kill` and `herd clean`: end sessions' trees; forget finished ones.

use herd_persistence::Home;
use herd_protocol::answers::{KillStatus, ListRow, SessionStatus};
use herd_protocol::methods::{Clean, Kill, List};
use herd_protocol::params::{CleanParams, IdParams, ListParams};

use super::ending;
use crate::args::{CleanArgs, KillArgs};
use crate::client::{Client, answer_of};
use crate::exit::{Code, Failure};
use crate::output;

/// `herd kill`: one or several sessions, or every running one of the owner, at
/// once (each tree kill waits its grace, so they run together).
pub(crate) async fn kill(home: &Home, args: KillArgs) -> anyhow::Result<()> {
    let ids = if args.all {
        let owner = args.owner.resolve("cli");
        let mut client = Client::connect(home).await?;
        let listed = client
            .ask::<List>(&ListParams {
                owner: Some(owner),
                ..ListParams::default()
            })
            .await?;
        // Queued jobs first: a running job killed first frees its group's slot,
        // and the queue would start the next before its own kill arrived.
        let (queued, others): (Vec<_>, Vec<_>) = listed
            .processes
            .into_iter()
            .partition(|row| row.status == SessionStatus::Queued);
        let ids = |rows: Vec<ListRow>| rows.into_iter().map(|row| row.session_id).collect();
        (ids(queued), ids(others))
    } else {
        (Vec::new(), args.ids.clone())
    };
    let (first, ids): (Vec<String>, Vec<String>) = ids;
    if first.is_empty() && ids.is_empty() {
        output::err_line("no running sessions to kill");
        return Ok(());
    }
    let kill_all = |ids: Vec<String>| async move {
        let answers = futures::future::join_all(ids.iter().map(|id| async move {
            let mut client = Client::connect(home).await?;
            client.send_typed::<Kill>(&IdParams::new(id.as_str())).await
        }))
        .await;
        (ids, answers)
    };
    let (mut queued, mut answers) = kill_all(first).await;
    let (others, rest) = kill_all(ids).await;
    queued.extend(others);
    answers.extend(rest);
    let ids = queued;
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
        let typed = answer_of::<Kill>(&answer)?;
        if args.json && several {
            output::json_line(&answer)?;
        } else if args.json {
            output::json_pretty(&answer)?;
        } else {
            let shown = output::visible(&typed.session_id).into_owned();
            match typed.status {
                KillStatus::Killed => output::line(&format!("{shown} killed"))?,
                KillStatus::AlreadyExited => {
                    let how = ending(&typed)
                        .split_once(' ')
                        .map(|(_, how)| how.to_owned())
                        .unwrap_or_default();
                    output::line(&format!("{shown} had already ended: {how}"))?;
                }
                _ => output::line(&format!(
                    "{shown}: {}",
                    output::visible(typed.error.as_deref().unwrap_or("kill incomplete"))
                ))?,
            }
        }
        failed |= typed.status == KillStatus::KillIncomplete;
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
        .send_typed::<Clean>(&CleanParams {
            owner,
            older_than_seconds: args.older_than,
        })
        .await?;
    if args.json {
        return Ok(output::json_pretty(&answer)?);
    }
    let n = answer_of::<Clean>(answer)?.forgotten;
    output::line(&if n == 1 {
        "forgot 1 finished session, its log and its receipt".to_owned()
    } else {
        format!("forgot {n} finished sessions, their logs and their receipts")
    })?;
    Ok(())
}
