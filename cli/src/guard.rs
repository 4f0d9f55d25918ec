//! `herd guard check` and the guard's host identity for the daemon.
//!
//! The guard itself (`herd_guards::judge`) is pure; this module only decides which
//! host it protects (this process's detected host plus configured or given image
//! names) and renders verdicts.

use herd_guards::{Block, Host, Verdict};
use serde_json::{Value, json};

use crate::args::GuardCheckArgs;
use crate::config::Config;
use crate::exit::{Code, Failure};
use crate::output;

/// The host to protect.
///
/// With an explicit command line (`herd guard check --host-cmdline`) the host is
/// exactly what the caller describes; otherwise it is this process as detected
/// (`herd`, its command line, its unit, `HERD_HOST_IMAGES`) plus `extra_images`.
pub(crate) fn host(extra_images: &[String], cmdline: Option<&str>) -> Host {
    match cmdline {
        Some(cmdline) => Host::new(extra_images.to_vec(), cmdline),
        None => Host::current().with_images(extra_images.iter().cloned()),
    }
}

/// The daemon's command line as this binary starts it (`herd serve`).
fn daemon_cmdline() -> String {
    let program = std::env::args_os()
        .next()
        .map_or_else(|| "herd".to_owned(), |p| p.to_string_lossy().into_owned());
    format!("{program} serve")
}

/// The JSON form of a verdict: `{"verdict", "rule", "reason", "remedy"}`.
pub(crate) fn verdict_json(block: Option<&Block>) -> Value {
    match block {
        Some(block) => json!({
            "verdict": "block",
            "rule": block.rule.as_str(),
            "target": block.target,
            "reason": block.reason,
            "remedy": block.remedy,
        }),
        None => json!({"verdict": "allow", "rule": null, "reason": null, "remedy": null}),
    }
}

/// Runs `herd guard check`.
///
/// # Errors
/// Exit code 1 (silently, the verdict is printed) when the command is blocked.
pub(crate) fn check(args: &GuardCheckArgs, config: &Config) -> anyhow::Result<()> {
    let command = if args.command.len() == 1 {
        args.command[0].clone()
    } else {
        shell_words::join(&args.command)
    };
    let mut images = args.host_image.clone();
    images.extend(config.guard_host_images.iter().cloned());
    let host = match args.host_cmdline.as_deref() {
        Some(cmdline) => host(&images, Some(cmdline)),
        // Judged as the daemon would: its command line is `herd serve`, not this
        // checker's, which holds the command being checked.
        None => host(&images, None).with_cmdline(daemon_cmdline()),
    };
    let verdict = herd_guards::judge(&command, &host);
    let block = match &verdict {
        Verdict::Allow => None,
        Verdict::Block(block) => Some(block),
    };
    if args.json {
        output::json_line(&verdict_json(block))?;
    } else {
        match block {
            None => output::line("allow")?,
            Some(block) => {
                output::line(&format!("block ({})", block.rule))?;
                output::line(&format!("reason: {}", block.reason))?;
                output::line(&format!("remedy: {}", block.remedy))?;
            }
        }
    }
    match block {
        None => Ok(()),
        Some(_) => Err(Failure::silent(Code::Failed).into()),
    }
}
