//! [`Host`]: what must not die, and how names on a command line are matched against it.
//!
//! Image names are matched as families: `python` stands for `python3`, `python3.12`,
//! `pythonw` and `python.exe` too, because the guard cannot know which of them a host that
//! calls itself `python` really runs as, and a miss costs the machine while a false alarm
//! costs a rephrased command. Unit and label names are matched without their `.service` /
//! `.plist` suffix, and a launchd label such as `ai.herd.daemon` matches the unit `herd`
//! when `herd` is one of its dot-separated segments.

use std::path::Path;

/// Herd's own image name, always part of [`Host::current`].
pub const HERD_IMAGE: &str = "herd";

/// Environment variable with extra image names (comma-separated) for [`Host::current`].
pub const HOST_IMAGES_ENV: &str = "HERD_HOST_IMAGES";

/// Environment variable with extra service unit or launchd label names (comma-separated)
/// for [`Host::current`].
pub const HOST_UNITS_ENV: &str = "HERD_HOST_UNITS";

/// Environment variable that marks a process as a supervised child of herd. Whether to
/// judge at all is the caller's decision; this is the marker herd itself uses.
pub const SUPERVISED_CHILD_ENV: &str = "HERD_SUPERVISED_CHILD";

/// Whether this process carries the supervised-child marker (`HERD_SUPERVISED_CHILD=1`).
pub fn is_supervised_child() -> bool {
    std::env::var_os(SUPERVISED_CHILD_ENV).is_some_and(|v| v == "1")
}

/// The lifecycle subcommands that come with the `herd` image.
const HERD_LIFECYCLE: [&[&str]; 5] = [
    &["shutdown"],
    &["daemon", "stop"],
    &["daemon", "restart"],
    &["daemon", "kill"],
    &["daemon", "shutdown"],
];

/// Version and platform suffixes tried when a name pattern is matched against an image.
const SAMPLE_SUFFIXES: [&str; 16] = [
    "", "2", "3", "2.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "w", ".exe",
    "3.exe", "w.exe", "-bin",
];

/// A host's own stop/restart command: a program and the subcommand words that follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    /// The program, as an image name (`herd`).
    pub program: String,
    /// The subcommand words, in order (`["daemon", "stop"]`).
    pub words: Vec<String>,
}

/// What must not die: the host's images, command line, units and lifecycle subcommands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// Invariant: normalised by `image_key` (lowercase, no directory, no `.exe`), no
    /// duplicates, no empty names.
    images: Vec<String>,
    cmdline: String,
    /// Invariant: normalised by `unit_key` (lowercase, no `.service`/`.plist`), no
    /// duplicates; every image is also a unit.
    units: Vec<String>,
    /// Invariant: a host with the `herd` image has herd's lifecycle subcommands.
    lifecycle: Vec<Lifecycle>,
}

impl Host {
    /// A host known by its image names and its own command line.
    ///
    /// Units default to the image names (a service is usually named after its program);
    /// add others with [`Host::with_units`]. A host whose images include `herd` also gets
    /// herd's lifecycle subcommands (`herd shutdown`, `herd daemon stop|restart|kill`).
    pub fn new(images: Vec<String>, cmdline: impl Into<String>) -> Host {
        let mut host = Host {
            images: Vec::new(),
            cmdline: cmdline.into(),
            units: Vec::new(),
            lifecycle: Vec::new(),
        };
        host.add_images(images);
        host
    }

    /// The host this process is: its image (`/proc/self/comm` and the program of
    /// `/proc/self/cmdline`), its command line, the systemd unit it runs in (from
    /// `/proc/self/cgroup`), the names listed in `HERD_HOST_IMAGES` / `HERD_HOST_UNITS`, and
    /// always `herd` itself.
    ///
    /// # Caveats
    /// Where `/proc` does not exist (macOS, Windows) only `herd` and the environment lists
    /// are known; add the rest with the builder methods.
    pub fn current() -> Host {
        let mut images = vec![HERD_IMAGE.to_owned()];
        if let Some(comm) = crate::sys::own_comm() {
            images.push(comm.trim().to_owned());
        }
        let mut cmdline = String::new();
        if let Some(raw) = crate::sys::own_cmdline() {
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if let Some(program) = args.first() {
                images.push(program.clone());
            }
            cmdline = args.join(" ");
        }
        images.extend(env_list(HOST_IMAGES_ENV));
        let mut units = env_list(HOST_UNITS_ENV);
        if let Some(cgroup) = crate::sys::own_cgroup() {
            units.extend(cgroup_units(&cgroup));
        }
        Host::new(images, cmdline).with_units(units)
    }

    /// Replaces the command line `pkill -f` patterns are matched against (a
    /// checker judging for the daemon gives the daemon's, not its own, which
    /// holds the very command it checks).
    #[must_use]
    pub fn with_cmdline(mut self, cmdline: impl Into<String>) -> Host {
        self.cmdline = cmdline.into();
        self
    }

    /// Adds image names (e.g. from the host's configuration).
    #[must_use]
    pub fn with_images<I, S>(mut self, images: I) -> Host
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.add_images(images.into_iter().map(Into::into).collect());
        self
    }

    /// Adds service unit or launchd label names (`herd.service`, `ai.herd.daemon`).
    #[must_use]
    pub fn with_units<I, S>(mut self, units: I) -> Host
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for unit in units {
            let unit = unit_key(&unit.into());
            if !unit.is_empty() && !self.units.contains(&unit) {
                self.units.push(unit);
            }
        }
        self
    }

    /// Adds a lifecycle subcommand of the host: `program` followed by `words` stops or
    /// restarts it (`with_lifecycle("hermes", ["gateway", "restart"])`).
    #[must_use]
    pub fn with_lifecycle<I, S>(mut self, program: impl Into<String>, words: I) -> Host
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let lifecycle = Lifecycle {
            program: image_key(&program.into()),
            words: words.into_iter().map(|w| w.into().to_lowercase()).collect(),
        };
        if !lifecycle.program.is_empty() && !self.lifecycle.contains(&lifecycle) {
            self.lifecycle.push(lifecycle);
        }
        self
    }

    /// The host's image names, normalised (lowercase, no directory, no `.exe`).
    pub fn images(&self) -> &[String] {
        &self.images
    }

    /// The host's own command line (arguments joined by spaces).
    pub fn cmdline(&self) -> &str {
        &self.cmdline
    }

    /// The host's unit and label names, normalised (lowercase, no `.service`).
    pub fn units(&self) -> &[String] {
        &self.units
    }

    /// The host's lifecycle subcommands.
    pub fn lifecycle(&self) -> &[Lifecycle] {
        &self.lifecycle
    }

    fn add_images(&mut self, images: Vec<String>) {
        for image in images {
            let key = image_key(&image);
            if key.is_empty() || self.images.contains(&key) {
                continue;
            }
            if family(&key) == HERD_IMAGE {
                for words in HERD_LIFECYCLE {
                    self.lifecycle.push(Lifecycle {
                        program: key.clone(),
                        words: words.iter().map(|w| (*w).to_owned()).collect(),
                    });
                }
            }
            if !self.units.contains(&key) {
                self.units.push(key.clone());
            }
            self.images.push(key);
        }
    }

    /// The host image a concrete process name (`python3.12`, `C:\py\python.exe`, a glob
    /// such as `py*`) stands for, if any.
    pub(crate) fn image_named(&self, name: &str) -> Option<&str> {
        let key = image_key(name);
        if key.is_empty() {
            return None;
        }
        if key.contains(['*', '?']) {
            return self
                .images
                .iter()
                .map(String::as_str)
                .find(|image| samples(image).any(|sample| glob_match(&key, &sample)));
        }
        let target = family(&key);
        self.images.iter().map(String::as_str).find(|image| {
            let host = family(image);
            target == host || target.strip_suffix('w') == Some(host.as_str())
        })
    }

    /// The host image a process-name matcher accepts, trying the version and platform
    /// spellings of every image.
    pub(crate) fn image_matching(&self, accepts: &mut dyn FnMut(&str) -> bool) -> Option<&str> {
        self.images
            .iter()
            .map(String::as_str)
            .find(|image| samples(image).any(|sample| accepts(&sample)))
    }

    /// The host unit a service-manager argument (`herd.service`, `gui/501/ai.herd.daemon`,
    /// `~/Library/LaunchAgents/ai.herd.daemon.plist`, `herd*`) names, if any.
    pub(crate) fn unit_named(&self, name: &str) -> Option<&str> {
        let key = unit_key(name);
        if key.is_empty() {
            return None;
        }
        let key = key.split('@').next().unwrap_or(&key).to_owned();
        self.units.iter().map(String::as_str).find(|unit| {
            let unit_base = unit.split('@').next().unwrap_or(unit);
            key == unit_base
                || (key.contains(['*', '?', '[']) && glob_match(&key, unit))
                || key.split('.').any(|segment| segment == unit_base)
        })
    }
}

/// Splits a comma-separated environment variable into names.
fn env_list(var: &str) -> Vec<String> {
    std::env::var(var)
        .map(|value| {
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The systemd service units named in a `/proc/self/cgroup` text.
pub(crate) fn cgroup_units(cgroup: &str) -> Vec<String> {
    cgroup
        .lines()
        .filter_map(|line| line.rsplit(':').next())
        .flat_map(|path| path.split('/'))
        .filter(|part| part.ends_with(".service") && !part.starts_with("user@"))
        .map(str::to_owned)
        .collect()
}

/// Lowercase basename without a Windows executable suffix.
pub(crate) fn image_key(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name).trim();
    let lower = base.to_lowercase();
    for suffix in [".exe", ".cmd", ".bat", ".com", ".ps1"] {
        if let Some(stem) = lower.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    lower
}

/// An image name without its version suffix: `python3.12` → `python`, `node18` → `node`.
pub(crate) fn family(key: &str) -> String {
    let trimmed = key.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let trimmed = if trimmed.len() < key.len() {
        trimmed.trim_end_matches(['-', '_'])
    } else {
        trimmed
    };
    if trimmed.is_empty() {
        key.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The concrete process names an image may run as.
fn samples(image: &str) -> impl Iterator<Item = String> + '_ {
    let base = family(image);
    let exact = std::iter::once(image.to_owned());
    exact.chain(
        SAMPLE_SUFFIXES
            .into_iter()
            .map(move |suffix| format!("{base}{suffix}")),
    )
}

/// Lowercase last path segment without `.service`/`.plist`.
pub(crate) fn unit_key(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name).trim();
    let lower = base.to_lowercase();
    for suffix in [".service", ".plist"] {
        if let Some(stem) = lower.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    lower
}

/// Case-insensitive glob match supporting `*` and `?` (other characters are literal).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || Some(c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((star_pi, star_ti)) => {
                    pi = star_pi + 1;
                    ti = star_ti + 1;
                    star = Some((star_pi, star_ti + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|c| *c == '*'))
}

/// The host image or unit a pid file is named after: `~/.herd/herd.pid` and
/// `run/herd-daemon.pid` for the host `herd`, but not `shepherd.pid`.
pub(crate) fn names_host_file(host: &Host, path: &str) -> Option<String> {
    let stem = Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(path)
        .to_lowercase();
    let tokens: Vec<String> = stem
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(family)
        .collect();
    host.images
        .iter()
        .chain(host.units.iter())
        .find(|name| {
            let wanted = family(name);
            tokens.contains(&wanted) || stem == **name
        })
        .cloned()
}

#[cfg(test)]
mod tests;
