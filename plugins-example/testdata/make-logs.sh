#!/bin/sh
# Records the two raw PTY logs in this directory from scratch.
#
# Usage: sh make-logs.sh SCRATCH_DIR
#
# SCRATCH_DIR must be outside the herd checkout (a crate inside it would be taken
# for a workspace member). It gets a fresh CARGO_HOME and npm cache, so the logs
# show real index updates and downloads from crates.io and the npm registry.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
scratch=$1
rm -rf "$scratch/demo-cargo" "$scratch/demo-npm" "$scratch/cargo-home" "$scratch/npm-cache"
mkdir -p "$scratch/demo-cargo/src" "$scratch/demo-npm"

# (a) cargo: a fresh crate with four dependencies; the first build warns about an
# unused variable, the second (after a type error is added) fails with E0308.
cd "$scratch/demo-cargo"
cat > Cargo.toml <<'TOML'
[package]
name = "demo-cargo"
version = "0.1.0"
edition = "2021"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
regex = "1"
anyhow = "1"
TOML
cat > main-with-warning.rs <<'RS'
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
struct Job {
    name: String,
    retries: u32,
}

fn main() -> anyhow::Result<()> {
    let re = regex::Regex::new(r"^job-(\d+)$")?;
    let unused_count = 3;
    let job: Job = serde_json::from_str(r#"{"name":"job-7","retries":2}"#)?;
    if re.is_match(&job.name) {
        eprintln!("{job:?}");
    }
    Ok(())
}
RS
sed -e 's/^    if re.is_match/    let retries: String = job.retries;\n    if re.is_match/' \
    -e 's/eprintln!("{job:?}");/eprintln!("{job:?} {retries}");/' \
    main-with-warning.rs > main-with-error.rs
cp main-with-warning.rs src/main.rs
python3 "$here/record-pty.py" "$here/cargo-build.pty.log" '
export CARGO_HOME='"$scratch"'/cargo-home CARGO_TERM_PROGRESS_WHEN=always CARGO_TERM_PROGRESS_WIDTH=120
cargo build --color=always
cp main-with-error.rs src/main.rs
cargo build --color=always' || true

# (b) npm: express and request (117 packages), undici@8 whose engines field
# excludes node 20 (npm warn EBADENGINE), then react@17 with react-dom@18, whose
# peer dependency cannot be met (npm error ERESOLVE).
cd "$scratch/demo-npm"
npm init -y > /dev/null
python3 "$here/record-pty.py" "$here/npm-install.pty.log" '
flags="--color=always --progress=true --loglevel=http --cache '"$scratch"'/npm-cache"
npm install $flags express request undici@8
npm install $flags react@17 react-dom@18' || true
