//! `herd send`, `herd submit`, `herd close` and `herd resize`: a job's input.

use herd_persistence::Home;
use herd_protocol::Method;
use herd_protocol::answers::StdinAnswer;
use herd_protocol::methods::{Close, Resize, Submit, Write};
use herd_protocol::params::{ResizeParams, StdinParams};
use serde_json::Value;

use crate::args::{IdArgs, StdinArgs};
use crate::client::{Client, answer_of, params_of};
use crate::exit::{Code, Failure};
use crate::output;

/// `herd send` / `herd submit`.
pub(crate) async fn stdin(home: &Home, args: StdinArgs, method: &str) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let params = StdinParams {
        id: args.id,
        data: args.text,
    };
    let answer = client.request(method, params_of(&params)?).await?;
    if method == Submit::NAME {
        stdin_answer::<Submit>(&answer, args.json)
    } else {
        stdin_answer::<Write>(&answer, args.json)
    }
}

/// `herd close`.
pub(crate) async fn close(home: &Home, args: IdArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let params = StdinParams {
        id: args.id,
        data: String::new(),
    };
    let answer = client.send_typed::<Close>(&params).await?;
    stdin_answer::<Close>(&answer, args.json)
}

/// `herd resize ID --rows R --cols C`.
pub(crate) async fn resize(home: &Home, args: crate::args::ResizeArgs) -> anyhow::Result<()> {
    let mut client = Client::connect(home).await?;
    let answer = client
        .send_typed::<Resize>(&ResizeParams {
            id: args.id,
            rows: args.rows,
            cols: args.cols,
        })
        .await?;
    stdin_answer::<Resize>(&answer, args.json)
}

/// Prints a stdin answer; exits 1 unless it is `ok`.
fn stdin_answer<M: Method<Answer = StdinAnswer>>(answer: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_line(answer)?;
    }
    let answer = answer_of::<M>(answer)?;
    match answer.status.as_str() {
        "ok" => {
            if !json {
                match answer.bytes_written {
                    Some(n) => output::line(&format!("ok ({n} bytes written)"))?,
                    None => {
                        output::line(&output::visible(answer.message.as_deref().unwrap_or("ok")))?
                    }
                }
            }
            Ok(())
        }
        "already_exited" => {
            Err(Failure::new(Code::Failed, "the process has already exited").into())
        }
        _ => Err(Failure::new(
            Code::Failed,
            answer
                .message
                .unwrap_or_else(|| "writing to stdin failed".to_owned()),
        )
        .into()),
    }
}
