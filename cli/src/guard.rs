//! `herd guard check` and the guard's host identity for the daemon.
//!
//! The guard itself (`herd_guards::judge`) is pure; this module only decides which
//! host it protects (this process's detected host plus configured or given image
//! names) and renders verdicts.

use herd_guards::{Block, Host, Verdict};
use herd_protocol::errors::GuardVerdict;

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

/// A verdict as the wire and `herd guard check --json` carry it: `{"verdict",
/// "rule", "reason", "remedy"}` (and a block's `target`).
pub(crate) fn verdict(block: Option<&Block>) -> GuardVerdict {
    match block {
        Some(block) => GuardVerdict {
            verdict: "block".to_owned(),
            rule: Some(block.rule.as_str().to_owned()),
            target: Some(block.target.clone()),
            reason: Some(block.reason.clone()),
            remedy: Some(block.remedy.clone()),
        },
        None => GuardVerdict {
            verdict: "allow".to_owned(),
            rule: None,
            target: None,
            reason: None,
            remedy: None,
        },
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
        output::json_line(&self::verdict(block))?;
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
