//! `herd handoff`: give a job to another owner.

use herd_persistence::Home;
use serde_json::json;

use crate::args::HandoffArgs;
use crate::client::Client;
use crate::output;

/// `herd handoff`.
pub(crate) async fn handoff(home: &Home, args: HandoffArgs) -> anyhow::Result<()> {
    let owner = args.owner.resolve("cli");
    let mut client = Client::connect(home).await?;
    let answer = client
        .request(
            "handoff",
            json!({"id": args.id, "from": owner, "to": args.to, "note": args.note}),
        )
        .await?;
    if args.json {
        output::json_pretty(&answer)?;
    } else {
        output::line(&format!("{} handed off to {}", args.id, args.to))?;
    }
    Ok(())
}
