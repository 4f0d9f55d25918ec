//! `herd hosts install NAME`: this herd binary copied to the far side through the
//! host's `install` argv (a command that receives the binary on stdin).
//!
//! Config holds the only argvs herd runs for a host, `command` and `install`, so
//! the far platform is learned through them, never through a command herd makes up:
//!
//! 1. The door (`command`) is opened. A far herd that answers, even one refused
//!    for its protocol, says its OS, architecture and glibc in the `proxy` object
//!    its `herd proxy` adds to the hello answer (see `proxy.rs`).
//! 2. A door that finds no herd (`command not found`, exit 127) is given a probe:
//!    [`PROBE_SCRIPT`], a short `sh` script, goes through the `install` argv to
//!    where herd will live, and the door, which now runs it as `herd proxy`,
//!    prints the far `uname -s`, `uname -m` and `getconf GNU_LIBC_VERSION`. Until
//!    the real binary replaces it, the script stands in for herd and says on
//!    stderr that herd is not installed (so `herd hosts check` names this command
//!    as the fix). It is only ever written where no herd answered.
//! 3. The far platform is judged: the same OS and architecture as this binary,
//!    and a glibc at least as new as the newest `GLIBC_x.y` this binary's ELF
//!    version-needs ask for (read from the running executable with the `object`
//!    crate). A refusal names both versions and installs nothing.
//! 4. `herd-shim` goes next, so far jobs survive a far daemon's crash: the
//!    `install` argv first receives [`SHIM_WRITER`], a short `sh` script that, run
//!    by the door as `herd proxy`, writes what it reads on stdin to `herd-shim`
//!    beside itself (`dirname "$0"`) and prints where; the door is then opened
//!    once with the shim on stdin.
//! 5. The binary goes through the `install` argv (replacing the script); then the
//!    door is opened again and must answer with this herd's version, a
//!    `herd-shim` beside it, and a far daemon whose jobs run under it (`status`
//!    says `supervisor: shim`), as `herd hosts check` demands.
//!
//! An `install` argv should write to a temporary name and rename it over the
//! old binary: a running far daemon keeps the old file busy (`ETXTBSY`).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use herd_protocol::methods::Status;
use herd_protocol::params::NoParams;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::door::{self, DoorError, Fix, ProxyInfo, StderrTail};
use crate::config::HostConfig;
use crate::exit::{Code, Failure};
use crate::output;

/// How long the `install` argv may take to receive the binary.
const INSTALL_DEADLINE: Duration = Duration::from_secs(300);

/// The most probe output read back.
const MAX_PROBE_BYTES: u64 = 64 * 1024;

/// The stand-in written where herd will live when the door finds no herd: it
/// reports the far platform and says herd is not installed.
pub(crate) const PROBE_SCRIPT: &str = "#!/bin/sh\n\
# Written by `herd hosts install` to learn this host's platform; the herd binary\n\
# replaces it when the platform fits.\n\
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')\n\
printf 'herd-probe os=%s arch=%s glibc=%s\\n' \"$(uname -s)\" \"$(uname -m)\" \"${glibc:-none}\"\n\
echo 'herd is not installed on this host (this is the probe `herd hosts install` left); run herd hosts install' >&2\n\
exit 127\n";

/// Put where herd will live, then run through the door with [`shim_header`] and
/// `herd-shim` on stdin: refuses any stdin that does not begin with that header
/// (a door opened by a daemon in this window sends protocol lines, which must not
/// become herd-shim), copies exactly the header's length, checks its SHA-256
/// (`sha256sum`, coreutils), writes it beside itself with a `herd-shim.sha256`
/// record the far proxy reports, then says where. The herd binary replaces it next.
pub(crate) const SHIM_WRITER: &str = "#!/bin/sh\n\
# Written by `herd hosts install` to put herd-shim beside herd; the herd binary\n\
# replaces it next.\n\
dir=$(dirname \"$0\")\n\
echo 'herd is not installed on this host yet (this is the step of `herd hosts install` that writes herd-shim); run herd hosts install' >&2\n\
IFS=' ' read -r magic len sum rest || exit 127\n\
{ [ \"$magic\" = herd-shim ] && [ -z \"$rest\" ] && [ ${#sum} -eq 64 ]; } || exit 127\n\
case \"$len$sum\" in ''|*[!0-9a-f]*) exit 127 ;; esac\n\
case \"$len\" in ''|*[!0-9]*) exit 127 ;; esac\n\
new=\"$dir/herd-shim.new\"\n\
if ! head -c \"$len\" > \"$new\"; then\n\
  rm -f \"$new\"\n\
  echo \"cannot write $new (see the error above): make $dir writable for this user\" >&2\n\
  exit 1\n\
fi\n\
got=$(sha256sum < \"$new\" | cut -d ' ' -f 1)\n\
if [ \"$got\" != \"$sum\" ]; then\n\
  rm -f \"$new\"\n\
  echo \"herd-shim arrived damaged (sha256 $got, not $sum): run herd hosts install again\" >&2\n\
  exit 1\n\
fi\n\
if ! { chmod 755 \"$new\" && mv -f \"$new\" \"$dir/herd-shim\" && printf '%s %s\\n' \"$sum\" \"$len\" > \"$dir/herd-shim.sha256\"; }; then\n\
  echo \"cannot write $dir/herd-shim (see the error above): make $dir writable for this user\" >&2\n\
  exit 1\n\
fi\n\
printf 'herd-shim-installed path=%s/herd-shim\\n' \"$dir\"\n\
exit 0\n";

/// The first line [`SHIM_WRITER`] demands: `herd-shim <len> <sha256>`.
pub(crate) fn shim_header(shim: &[u8]) -> String {
    format!("herd-shim {} {}\n", shim.len(), sha256_hex(shim))
}

/// SHA-256 in lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A glibc version, `2.34` or `2.17.1`, ordered numerically.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct GlibcVersion(Vec<u32>);

impl GlibcVersion {
    /// Parses `2.36` (a trailing `-9+deb12u4` or suffix of letters is ignored).
    pub(crate) fn parse(text: &str) -> Option<GlibcVersion> {
        let numeric: String = text
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let parts: Option<Vec<u32>> = numeric
            .split('.')
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok())
            .collect();
        parts.filter(|p| p.len() >= 2).map(GlibcVersion)
    }
}

impl std::fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// The glibc this process runs on (`getconf GNU_LIBC_VERSION`), none without glibc.
pub(crate) fn running_glibc() -> Option<String> {
    let out = crate::auxiliary::command("getconf")
        .arg("GNU_LIBC_VERSION")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ")?;
    GlibcVersion::parse(version).map(|v| v.to_string())
}

/// The newest `GLIBC_x.y` an ELF image's version-needs ask for; none for an
/// image that needs no glibc symbol version (static, or not built against glibc).
///
/// # Errors
/// An image that is not a readable 64-bit little-endian ELF file.
pub(crate) fn needed_glibc(image: &[u8]) -> Result<Option<GlibcVersion>, String> {
    use object::read::elf::{ElfFile64, FileHeader};
    let elf = ElfFile64::<object::Endianness>::parse(image).map_err(|e| e.to_string())?;
    let endian = elf.endian();
    let header = elf.elf_header();
    let sections = header.sections(endian, image).map_err(|e| e.to_string())?;
    let Some((mut needs, link)) = sections
        .gnu_verneed(endian, image)
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let strings = sections
        .strings(endian, image, link)
        .map_err(|e| e.to_string())?;
    let mut newest: Option<GlibcVersion> = None;
    while let Some((_need, mut auxes)) = needs.next().map_err(|e| e.to_string())? {
        while let Some(aux) = auxes.next().map_err(|e| e.to_string())? {
            let name = aux.name(endian, strings).map_err(|e| e.to_string())?;
            let Some(version) = std::str::from_utf8(name)
                .ok()
                .and_then(|n| n.strip_prefix("GLIBC_"))
                .and_then(GlibcVersion::parse)
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|n| version > *n) {
                newest = Some(version);
            }
        }
    }
    Ok(newest)
}

/// A machine's OS, architecture and glibc, in Rust's names (`linux`, `x86_64`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Platform {
    /// `linux`, ...
    pub(crate) os: String,
    /// `x86_64`, `aarch64`, ...
    pub(crate) arch: String,
    /// `2.36`, none without glibc.
    pub(crate) glibc: Option<String>,
}

impl Platform {
    /// This machine.
    pub(crate) fn here() -> Platform {
        Platform {
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            glibc: running_glibc(),
        }
    }

    fn of_proxy(info: &ProxyInfo) -> Platform {
        Platform {
            os: info.os.clone(),
            arch: info.arch.clone(),
            glibc: info.glibc.clone(),
        }
    }

    /// Parses the probe's `herd-probe os=Linux arch=x86_64 glibc=2.36` line,
    /// mapping `uname`'s names to Rust's.
    pub(crate) fn of_probe(output: &str) -> Option<Platform> {
        let line = output
            .lines()
            .find_map(|l| l.trim().strip_prefix("herd-probe "))?;
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key))
                .map(str::to_owned)
        };
        let os = field("os=")?.to_ascii_lowercase();
        let arch = match field("arch=")?.as_str() {
            "arm64" | "aarch64" => "aarch64".to_owned(),
            "i386" | "i486" | "i586" | "i686" => "x86".to_owned(),
            "amd64" => "x86_64".to_owned(),
            a if a.starts_with("armv") => "arm".to_owned(),
            other => other.to_owned(),
        };
        let os = if os == "darwin" {
            "macos".to_owned()
        } else {
            os
        };
        let glibc = field("glibc=").filter(|g| g != "none");
        Some(Platform { os, arch, glibc })
    }
}

/// Why this binary cannot run on `far`, or none when it can.
pub(crate) fn refusal(
    here: &Platform,
    needed: Option<&GlibcVersion>,
    far: &Platform,
) -> Option<String> {
    if far.os != here.os || far.arch != here.arch {
        return Some(format!(
            "the far side is {}/{} and this herd is built for {}/{}: install a herd built for {}/{} there",
            far.os, far.arch, here.os, here.arch, far.os, far.arch
        ));
    }
    let needed = needed?;
    match far.glibc.as_deref().and_then(GlibcVersion::parse) {
        None => Some(format!(
            "the far side has no glibc (musl, or getconf cannot tell) and this herd needs glibc {needed} \
             or newer (plugins need a dynamic binary, so there is no static build): install herd \
             built on that system"
        )),
        Some(far_glibc) if far_glibc < *needed => Some(format!(
            "the far side's glibc is {far_glibc} and this herd needs glibc {needed} or newer: build herd \
             on a system with glibc {far_glibc} or older, or upgrade the far system"
        )),
        Some(_) => None,
    }
}

/// Sends `bytes` to `argv`'s stdin (run as a door is: no shell, no terminal) and
/// waits for it to exit 0; what it printed on stdout (at most [`MAX_PROBE_BYTES`]).
async fn send(argv: &[String], bytes: &[u8], what: &str) -> Result<Vec<u8>, String> {
    let mut child = door::detached(argv).spawn().map_err(|err| {
        format!(
            "cannot start the install argv {}: {err}",
            shell_words::join(argv)
        )
    })?;
    let stderr = StderrTail::follow(child.stderr.take());
    let mut stdout = child.stdout.take();
    let drain = tokio::spawn(async move {
        let mut sink = Vec::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.take(MAX_PROBE_BYTES).read_to_end(&mut sink).await;
        }
        sink
    });
    let mut stdin = child.stdin.take();
    let sent = async {
        if let Some(stdin) = stdin.as_mut() {
            stdin.write_all(bytes).await?;
            stdin.shutdown().await?;
        }
        drop(stdin.take());
        child.wait().await
    };
    let status = tokio::time::timeout(INSTALL_DEADLINE, sent).await;
    if status.is_err() {
        let _ = child.start_kill();
    }
    // The child has exited (or was given up): its stdout ends with it.
    let printed = match tokio::time::timeout(door::HELLO_DEADLINE, drain).await {
        Ok(Ok(bytes)) => bytes,
        _ => Vec::new(),
    };
    let said = || {
        let text = stderr.text();
        if text.trim().is_empty() {
            "; it wrote nothing on stderr".to_owned()
        } else {
            format!(
                "; it said:\n  {}",
                text.lines().collect::<Vec<_>>().join("\n  ")
            )
        }
    };
    match status {
        Err(_) => Err(format!(
            "the install argv did not finish receiving {what} within {}s{}",
            INSTALL_DEADLINE.as_secs(),
            said()
        )),
        Ok(Err(err)) => Err(format!(
            "the install argv failed receiving {what}: {err}{}",
            said()
        )),
        Ok(Ok(status)) if status.success() => Ok(printed),
        Ok(Ok(status)) => {
            let fix = door::diagnose("", argv, &stderr.text(), status.code());
            Err(format!(
                "the install argv failed receiving {what} ({status}){}\nfix: {}",
                said(),
                match fix {
                    Fix::HerdMissing { .. } | Fix::ByHand { .. } => format!(
                        "run it by hand with a file on stdin: {} < FILE",
                        shell_words::join(argv)
                    ),
                    other => other.to_string(),
                }
            ))
        }
    }
}

/// Runs the door once with the probe in place and reads the platform it prints.
async fn probe(name: &str, host: &HostConfig) -> anyhow::Result<Platform> {
    let mut child = door::command(name, host)
        .spawn()
        .with_context(|| format!("cannot start host {name}'s door"))?;
    drop(child.stdin.take());
    let stderr = StderrTail::follow(child.stderr.take());
    let mut out = Vec::new();
    let read = async {
        if let Some(stdout) = child.stdout.take() {
            let _ = stdout.take(MAX_PROBE_BYTES).read_to_end(&mut out).await;
        }
        child.wait().await
    };
    let status = tokio::time::timeout(door::HELLO_DEADLINE, read).await;
    let text = String::from_utf8_lossy(&out);
    if let Some(platform) = Platform::of_probe(&text) {
        return Ok(platform);
    }
    let code = status.ok().and_then(Result::ok).and_then(|s| s.code());
    let said = stderr.text();
    let fix = door::diagnose(name, &host.command, &said, code);
    let why = if matches!(fix, Fix::HerdMissing { .. }) {
        format!(
            "the install argv ran, but host {name}'s command still finds no herd: make `install` write \
             to the path `command` runs herd from (a non-interactive ssh session's PATH is short: a full \
             path in both is surest)"
        )
    } else {
        format!("fix: {fix}")
    };
    Err(Failure::new(
        Code::Unreachable,
        format!(
            "host {name}: the probe printed no platform{}\n{why}",
            if said.trim().is_empty() {
                String::new()
            } else {
                format!(
                    "; the door said:\n  {}",
                    said.lines().collect::<Vec<_>>().join("\n  ")
                )
            }
        ),
    )
    .into())
}

/// Runs `herd hosts install NAME`.
///
/// # Errors
/// Exit 2 without an `install` argv or for a platform this binary cannot run on,
/// 3 when the door does not open, 1 when the `install` argv fails.
pub(crate) async fn run(name: &str, host: &HostConfig, json: bool) -> anyhow::Result<()> {
    let Some(install) = host.install.as_deref() else {
        return Err(Failure::new(
            Code::Usage,
            format!(
                "host {name} has no `install` argv: add one to [hosts.{name}] in config.toml, a command that \
                 receives the binary on stdin, e.g. install = [\"ssh\", \"{name}\", \"cat > ~/.local/bin/herd.new \
                 && chmod +x ~/.local/bin/herd.new && mv ~/.local/bin/herd.new ~/.local/bin/herd\"]"
            ),
        )
        .into());
    };
    let exe = std::env::current_exe().context("cannot find this herd executable")?;
    let image = read_binary(&exe)?;
    let shim = read_shim(&exe)?;
    let needed = needed_glibc(&image).map_err(|err| {
        Failure::new(
            Code::Failed,
            format!(
                "cannot read the ELF version-needs of {}: {err}",
                exe.display()
            ),
        )
    })?;
    let here = Platform::here();
    let ours = env!("CARGO_PKG_VERSION");

    // 1. What is there now.
    let (far, before) = match door::open(name, host, door::HELLO_DEADLINE).await {
        Ok(door) => {
            let info = door.hello.proxy.clone();
            door.close().await;
            let Some(info) = info else {
                return Err(Failure::new(
                    Code::Unreachable,
                    format!(
                        "host {name}: the far herd answered without saying its platform (it is not `herd proxy` \
                         of this herd's kind); install herd there by hand"
                    ),
                )
                .into());
            };
            let ours_hash = sha256_hex(&shim);
            let shim_fits = info.shim.as_ref().is_some_and(|far| {
                far.bytes == shim.len() as u64 && far.sha256.as_deref() == Some(ours_hash.as_str())
            });
            if info.version == ours && shim_fits && far_supervisor(name, host).await? {
                return report(
                    name,
                    json,
                    false,
                    &Platform::of_proxy(&info),
                    needed.as_ref(),
                    Some(&info.version),
                );
            }
            let version = info.version.clone();
            (Platform::of_proxy(&info), Some(version))
        }
        Err(err) if err.proxy().is_some() => {
            let info = err.proxy().cloned().expect("checked just above");
            (Platform::of_proxy(&info), Some(info.version))
        }
        Err(err) if matches!(err.fix(), Some(Fix::HerdMissing { .. })) => {
            tracing::debug!(host = name, "no far herd; probing the platform");
            send(install, PROBE_SCRIPT.as_bytes(), "the platform probe")
                .await
                .map_err(|why| Failure::new(Code::Failed, format!("host {name}: {why}")))?;
            (probe(name, host).await?, None)
        }
        Err(err) => return Err(err.into_failure()),
    };

    // 2. Whether this binary runs there.
    if let Some(why) = refusal(&here, needed.as_ref(), &far) {
        let installed = if before.is_none() {
            " (the platform probe stays where herd would go and says herd is not installed)"
        } else {
            ""
        };
        return Err(Failure::new(
            Code::Usage,
            format!("host {name}: refused to install herd {ours}: {why}{installed}"),
        )
        .into());
    }

    // 3. The binary, then the check.
    send_shim(name, host, install, &shim).await?;
    send_and_check(name, host, install, &image).await?;
    report(name, json, true, &far, needed.as_ref(), before.as_deref())
}

/// Sends the binary through the `install` argv, then opens the door again and checks
/// it now runs this herd's version.
async fn send_and_check(
    name: &str,
    host: &HostConfig,
    install: &[String],
    image: &[u8],
) -> anyhow::Result<()> {
    let ours = env!("CARGO_PKG_VERSION");
    send(install, image, "the herd binary")
        .await
        .map_err(|why| Failure::new(Code::Failed, format!("host {name}: {why}")))?;
    let door = door::open(name, host, door::HELLO_DEADLINE)
        .await
        .map_err(|err| {
            Failure::new(
                Code::Unreachable,
                format!("host {name}: herd {ours} was sent, but the check after it failed: {err}"),
            )
        })?;
    let after = door.hello.proxy.as_ref().map(|p| p.version.clone());
    let has_shim = door.hello.proxy.as_ref().is_some_and(|p| p.shim.is_some());
    let mut door = door;
    let supervisor = door.ask::<Status>(&NoParams {}).await.ok();
    door.close().await;
    if after.as_deref() != Some(ours) {
        return Err(Failure::new(
            Code::Failed,
            format!(
                "host {name}: herd {ours} was sent, but the door still runs herd {}: make `install` write \
                 to the path `command` runs herd from",
                after.as_deref().unwrap_or("of an unknown version")
            ),
        )
        .into());
    }
    if !has_shim {
        return Err(Failure::new(
            Code::Failed,
            format!(
                "host {name}: herd {ours} was sent, but the far herd finds no herd-shim beside it: far jobs \
                 would end with the far daemon; make `install` write to the directory `command` runs herd from"
            ),
        )
        .into());
    }
    let supervisor = supervisor
        .map(|s| s.supervisor)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    if supervisor != "shim" {
        return Err(Failure::new(Code::Failed, without_survival(name, &supervisor)).into());
    }
    Ok(())
}

/// The error for a far daemon whose jobs would not survive its crash.
pub(crate) fn without_survival(name: &str, supervisor: &str) -> String {
    format!(
        "host {name}: the far daemon runs jobs without crash survival (supervisor {supervisor}, not herd-shim): \
         a crash or restart of it ends every far job, and their completions never arrive. If herd-shim \
         was installed after that daemon started, stop it on the far side (`herd shutdown` there; it ends \
         the jobs it runs) so the next one uses herd-shim; else `herd hosts install {name}`, or remove \
         `supervisor = \"in_process\"` / fix `shim_path` in the far config.toml"
    )
}

/// `herd hosts install --json`.
#[derive(Serialize)]
struct Installed<'a> {
    host: &'a str,
    installed: bool,
    version: &'a str,
    previous_version: Option<&'a str>,
    far: FarPlatform<'a>,
    needed_glibc: Option<String>,
    shim: bool,
}

/// The far side's platform.
#[derive(Serialize)]
struct FarPlatform<'a> {
    os: &'a str,
    arch: &'a str,
    glibc: Option<&'a str>,
}

/// Whether the far daemon runs jobs under herd-shim (asked through a new door).
async fn far_supervisor(name: &str, host: &HostConfig) -> anyhow::Result<bool> {
    let mut door = door::open(name, host, door::HELLO_DEADLINE)
        .await
        .map_err(DoorError::into_failure)?;
    let status = door.ask::<Status>(&NoParams {}).await;
    door.close().await;
    Ok(status?.supervisor == "shim")
}

/// Sends `herd-shim` to the far side: [`SHIM_WRITER`] through the `install` argv,
/// then the shim through the door, which runs the writer.
async fn send_shim(
    name: &str,
    host: &HostConfig,
    install: &[String],
    shim: &[u8],
) -> anyhow::Result<()> {
    send(install, SHIM_WRITER.as_bytes(), "the herd-shim writer")
        .await
        .map_err(|why| Failure::new(Code::Failed, format!("host {name}: {why}")))?;
    let mut framed = shim_header(shim).into_bytes();
    framed.extend_from_slice(shim);
    let printed = send(&host.command, &framed, "herd-shim")
        .await
        .map_err(|why| Failure::new(Code::Failed, format!("host {name}: {why}")))?;
    let text = String::from_utf8_lossy(&printed);
    if !text.lines().any(|l| l.starts_with("herd-shim-installed ")) {
        return Err(Failure::new(
            Code::Failed,
            format!(
                "host {name}: the door did not run the herd-shim writer `install` had just written (it printed {:?}): \
                 make `install` write to the path `command` runs herd from",
                text.chars().take(200).collect::<String>()
            ),
        )
        .into());
    }
    tracing::debug!(host = name, said = %text.trim(), "herd-shim sent");
    Ok(())
}

/// The `herd-shim` beside this executable, which far jobs need to survive a far
/// daemon's crash.
fn read_shim(exe: &Path) -> anyhow::Result<Vec<u8>> {
    let path = exe.with_file_name("herd-shim");
    std::fs::read(&path).map_err(|err| {
        Failure::new(
            Code::Usage,
            format!(
                "cannot read {}: {err}; `herd hosts install` sends herd-shim with herd (far jobs run under \
                 it to survive a far daemon's crash): install herd-shim beside this herd",
                path.display()
            ),
        )
        .into()
    })
}

/// Reads the executable (a few tens of MiB at most).
fn read_binary(exe: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(exe)
        .with_context(|| format!("cannot read this herd executable {}", exe.display()))
}

/// Prints what was done.
fn report(
    name: &str,
    json: bool,
    installed: bool,
    far: &Platform,
    needed: Option<&GlibcVersion>,
    before: Option<&str>,
) -> anyhow::Result<()> {
    let ours = env!("CARGO_PKG_VERSION");
    if json {
        output::json_line(&Installed {
            host: name,
            installed,
            version: ours,
            previous_version: before,
            far: FarPlatform {
                os: &far.os,
                arch: &far.arch,
                glibc: far.glibc.as_deref(),
            },
            needed_glibc: needed.map(ToString::to_string),
            shim: true,
        })?;
    } else if installed {
        output::line(&format!(
            "host {name}: installed herd {ours} and herd-shim ({}/{}, glibc {}; this herd needs {}){}; `herd hosts check {name}` passes",
            far.os,
            far.arch,
            far.glibc.as_deref().unwrap_or("none"),
            needed.map_or_else(|| "none".to_owned(), |n| n.to_string()),
            before.map_or_else(String::new, |b| format!(", replacing herd {b}")),
        ))?;
    } else {
        output::line(&format!(
            "host {name}: herd {ours} is already installed; nothing to do"
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
