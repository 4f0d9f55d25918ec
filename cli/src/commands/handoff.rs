//! `herd handoff`: give a job to another owner.

use herd_persistence::Home;
use herd_protocol::methods::Handoff;
use herd_protocol::params::HandoffParams;

use crate::args::HandoffArgs;
use crate::client::Client;
use crate::output;

/// `herd handoff`.
pub(crate) async fn handoff(home: &Home, args: HandoffArgs) -> anyhow::Result<()> {
    let owner = args.owner.resolve("cli");
    let mut client = Client::connect(home).await?;
    let answer = client
        .send_typed::<Handoff>(&HandoffParams {
            id: args.id.clone(),
            from: owner,
            to: Some(args.to.clone()),
            note: args.note.clone(),
        })
        .await?;
    if args.json {
        output::json_pretty(&answer)?;
    } else {
        output::line(&format!("{} handed off to {}", args.id, args.to))?;
    }
    Ok(())
}
