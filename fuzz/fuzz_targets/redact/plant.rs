//! The secrets the redact target plants, in the forms tools print them, and the
//! parts of each that must never be shown.

use std::fmt::Write as _;

/// Which secret an input plants (bits 0-1 of the form byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `ghp_` token, alone on its line or between words.
    Token,
    /// A PEM private key block.
    Pem,
    /// A PuTTY `.ppk` private key file.
    Ppk,
    /// A password in a command line (`mysql -pX`, `API_TOKEN=X cmd`, ...).
    Command,
}

/// How the secret is printed: decoded from the input's flags, form and extra bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Form {
    pub(crate) kind: Kind,
    /// Every line of the secret behind (or ahead of) this: 0 none, 1 `path:`, 2
    /// `grep -n` (`path:N:`), 3 `cat -A` (`$` at the end), 4 a `\r` progress frame,
    /// 5 a container log prefix, 6 a diff `+`, 7 `nl` numbers.
    pub(crate) prefix: u8,
    /// 0 none, 1 the block as a JSON string, 2 as a JSON string in a JSON string,
    /// 3 every character underlined in overstrike (`_\bx`).
    pub(crate) escaping: u8,
    /// Every character in bold overstrike (`x\bx`), as `man` prints.
    pub(crate) bold: bool,
    /// A terminated DCS/SOS/PM/APC (or OSC) string inside every secret line.
    pub(crate) string_inside: bool,
    /// Which string introducer: 0-4 ESC P/X/^/_/], 5-7 their C1 forms.
    pub(crate) string_kind: u8,
    /// A key block longer than 64 KiB (more than one redaction block).
    pub(crate) long: bool,
    /// The key block has no END line (it ends at the first line that is not body).
    pub(crate) no_end: bool,
    pub(crate) seed: u8,
}

impl Form {
    pub(crate) fn new(flags: u8, seed: u8, form: u8, extra: u8) -> Form {
        let escaping = (form >> 5) & 0x03;
        let prefix = (form >> 2) & 0x07;
        Form {
            kind: match form & 0x03 {
                0 => Kind::Token,
                1 => Kind::Pem,
                2 => Kind::Ppk,
                _ => Kind::Command,
            },
            prefix,
            escaping,
            bold: flags & 0x20 != 0,
            string_inside: form & 0x80 != 0,
            string_kind: extra & 0x07,
            long: extra & 0x08 != 0,
            no_end: extra & 0x10 != 0,
            seed,
        }
    }
}

/// A planted secret: the text printed, and the fragments that must not be shown.
#[derive(Debug)]
pub(crate) struct Planted {
    /// The secret as printed (one or more lines, no newline at either end).
    pub(crate) printed: String,
    /// Strings of which no run of `min_run` characters may be shown.
    pub(crate) fragments: Vec<String>,
    /// The shortest run of a fragment that counts as shown (a mask shows 6 + 4
    /// characters of a token; a key mask none of the body).
    pub(crate) min_run: usize,
    /// A token's first byte in `printed` (its overstrike or escaping included): a
    /// route's source never starts after it while its window shows part of the
    /// token, since herd reads `KEY_LOOKBACK_BYTES` before a window, more than a
    /// token's line. `None` for keys and command lines: a key's state is carried
    /// into a source that starts anywhere inside its block.
    pub(crate) head: Option<usize>,
}

/// `n` characters of `alphabet` from a xorshift seeded by `seed`.
fn random(seed: u64, n: usize, alphabet: &[u8]) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(alphabet[usize::try_from(state % alphabet.len() as u64).unwrap_or(0)])
        })
        .collect()
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A `ghp_` token of 36 alphanumerics derived from `seed`, which the built-in
/// family masks.
pub(crate) fn token(seed: u8) -> String {
    let mut state = u32::from(seed).wrapping_mul(2_654_435_761).wrapping_add(1);
    let body: String = (0..36)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from(ALNUM[state as usize % ALNUM.len()])
        })
        .collect();
    format!("ghp_{body}")
}

/// The password a command line carries.
pub(crate) fn password(seed: u8) -> String {
    format!("S3c{}", random(u64::from(seed) + 1000, 13, ALNUM))
}

/// The command-line forms a password is given in (`{}` is the password).
const COMMAND_FORMS: [&str; 14] = [
    "API_TOKEN={} deploy.sh",
    "env PGPASSWORD='{}' psql -h db",
    "mysql -u root -p{} db",
    "mysqldump --password={} db",
    "app --password {} --verbose",
    "curl -u admin:{} https://x.example",
    "curl --user=admin:{} https://x.example",
    "sshpass -p '{}' ssh host",
    "sshpass -p{} ssh host",
    "docker login -u me -p {}",
    "redis-cli -h db -a {} ping",
    "git clone https://me:{}@github.com/o/r.git",
    "openssl enc -aes256 -pass pass:{} -in f",
    "bash -c 'SECRET_KEY={} ./run'",
];

/// What may stand before the form on its command line.
const COMMAND_LEADS: [&str; 4] = ["", "cd /srv && ", "time ", "a; "];

/// The command line of `Kind::Command`: a form, then `after`.
pub(crate) fn command(form: &Form, after: &str) -> Planted {
    let pass = password(form.seed);
    let shape = COMMAND_FORMS[usize::from(form.seed) % COMMAND_FORMS.len()];
    let lead = COMMAND_LEADS[usize::from(form.seed >> 4) % COMMAND_LEADS.len()];
    Planted {
        printed: format!("{lead}{} {after}", shape.replace("{}", &pass)),
        min_run: pass.len(),
        fragments: vec![pass],
        head: None,
    }
}

/// The lines of the key block, and the ones that are secret.
fn key_lines(form: &Form) -> (Vec<String>, Vec<String>) {
    let seed = u64::from(form.seed);
    let n_body = if form.long {
        1100
    } else {
        1 + usize::from(form.seed % 8)
    };
    let body: Vec<String> = (0..n_body)
        .map(|i| random(seed * 7919 + i as u64, 64, BASE64))
        .collect();
    let mut lines = Vec::with_capacity(n_body + 8);
    match form.kind {
        Kind::Ppk => {
            lines.push("PuTTY-User-Key-File-3: ssh-rsa".to_owned());
            lines.push("Encryption: none".to_owned());
            lines.push("Comment: rsa-key-20260101".to_owned());
            lines.push("Public-Lines: 2".to_owned());
            lines.push(format!("AAAAB3NzaC1yc2E{}", random(seed + 77, 49, BASE64)));
            lines.push(random(seed + 78, 20, BASE64));
            lines.push(format!("Private-Lines: {n_body}"));
            lines.extend(body.iter().cloned());
            if !form.no_end {
                lines.push(format!(
                    "Private-MAC: {}",
                    random(seed + 79, 64, b"0123456789abcdef")
                ));
            }
        }
        _ => {
            lines.push("-----BEGIN RSA PRIVATE KEY-----".to_owned());
            lines.extend(body.iter().cloned());
            if !form.no_end {
                lines.push("-----END RSA PRIVATE KEY-----".to_owned());
            }
        }
    }
    // A long block is checked on a sample of its lines: every line is alike, and
    // the edges (the first lines, the last ones) are where windows go wrong.
    let secret = if body.len() <= 16 {
        body
    } else {
        body.iter()
            .enumerate()
            .filter(|(i, _)| *i < 3 || *i + 3 >= n_body || i % 97 == 0)
            .map(|(_, l)| l.clone())
            .collect()
    };
    (lines, secret)
}

/// `text` in overstrike: every character bold (`c\bc`) or underlined (`_\bc`).
fn overstrike(text: &str, bold: bool) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for c in text.chars() {
        if bold {
            let _ = write!(out, "{c}\u{8}{c}");
        } else {
            let _ = write!(out, "_\u{8}{c}");
        }
    }
    out
}

/// A terminated string escape (it hides its body from a terminal).
fn string_escape(kind: u8) -> &'static str {
    match kind {
        0 => "\u{1b}Pq#0;2\u{1b}\\",
        1 => "\u{1b}Xsos\u{1b}\\",
        2 => "\u{1b}^pm\u{1b}\\",
        3 => "\u{1b}_apc\u{1b}\\",
        4 => "\u{1b}]0;title\u{7}",
        5 => "\u{90}q\u{9c}",
        6 => "\u{98}sos\u{9c}",
        _ => "\u{9f}apc\u{9c}",
    }
}

/// One line of the secret as the form prints it: the escape string inside, the
/// overstrike, then the prefix.
fn decorate(form: &Form, i: usize, line: &str) -> String {
    let mut line = line.to_owned();
    let inside = form.string_inside && line.len() > 8 && line.is_char_boundary(6);
    let struck = form.bold || form.escaping == 3;
    if inside && !struck {
        line.insert_str(6, string_escape(form.string_kind));
    }
    if struck {
        // The escape goes between two overstruck characters: nroff overstrikes
        // printable characters, never an escape's bytes.
        let cell_6 = if inside {
            overstrike(&line[..6], form.bold).len()
        } else {
            0
        };
        line = overstrike(&line, form.bold);
        if inside {
            line.insert_str(cell_6, string_escape(form.string_kind));
        }
    }
    match form.prefix {
        1 => format!("/home/u/.ssh/id_rsa:{line}"),
        2 => format!("id_rsa:{}:{line}", i + 1),
        3 => format!("{line}$"),
        4 => format!(" 42% [=====>     ]\r{line}"),
        5 => format!("web-1  | {line}"),
        6 => format!("+{line}"),
        7 => format!("{:>6}\t{line}", i + 1),
        _ => line,
    }
}

/// A private key block as `form` prints it.
pub(crate) fn key(form: &Form) -> Planted {
    let (lines, secret) = key_lines(form);
    let printed: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| decorate(form, i, l))
        .collect();
    let block = printed.join("\n");
    let printed = match form.escaping {
        1 => format!(
            "{{\"key\": {}}}",
            serde_json::to_string(&format!("{block}\n")).unwrap_or_default()
        ),
        2 => {
            let once = serde_json::to_string(&format!("{block}\n")).unwrap_or_default();
            format!(
                "{{\"secret\": {}}}",
                serde_json::to_string(&format!("{{\"key\": {once}}}")).unwrap_or_default()
            )
        }
        _ => block,
    };
    Planted {
        printed,
        fragments: secret,
        min_run: 16,
        head: None,
    }
}

/// The token as `form` prints it.
pub(crate) fn planted_token(form: &Form) -> Planted {
    let token = token(form.seed);
    let line = decorate(form, 0, &token);
    let printed = match form.escaping {
        1 | 2 => serde_json::to_string(&line).unwrap_or_default(),
        _ => line,
    };
    // The token's `ghp_` as printed: overstruck as the line, escaped as the line.
    let mut head = if form.bold {
        overstrike("ghp_", true)
    } else if form.escaping == 3 {
        overstrike("ghp_", false)
    } else {
        "ghp_".to_owned()
    };
    if matches!(form.escaping, 1 | 2) {
        let quoted = serde_json::to_string(&head).unwrap_or_default();
        head = quoted.trim_matches('"').to_owned();
    }
    Planted {
        head: Some(printed.find(&head).unwrap_or(0)),
        printed,
        min_run: 10,
        fragments: vec![token],
    }
}

/// Whether `text` (from the fuzzer) holds a run of 8 characters of a fragment:
/// then a fragment shown may be the fuzzer's copy, not the planted one, and the
/// input is not judged.
pub(crate) fn copies_a_fragment(text: &str, planted: &Planted) -> bool {
    Runs::new(planted, 8).first_in(text).is_some()
}

/// Finds runs of at least `run` characters of the fragments in a text: every such
/// run holds a whole aligned block of `run / 2` bytes of its fragment, so the text
/// is read once, each position's block looked up, and only the hits extended.
#[derive(Debug)]
pub(crate) struct Runs<'p> {
    fragments: &'p [String],
    run: usize,
    block: usize,
    /// Aligned blocks of every fragment: (its bytes as a number, fragment, offset).
    blocks: Vec<(u64, usize, usize)>,
}

fn block_key(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |k, b| (k << 8) | u64::from(*b))
}

impl<'p> Runs<'p> {
    pub(crate) fn new(planted: &'p Planted, run: usize) -> Runs<'p> {
        let block = (run / 2).clamp(1, 8);
        let mut blocks = Vec::new();
        for (idx, f) in planted.fragments.iter().enumerate() {
            let fb = f.as_bytes();
            let mut at = 0;
            while at + block <= fb.len() {
                blocks.push((block_key(&fb[at..at + block]), idx, at));
                at += block;
            }
        }
        blocks.sort_unstable();
        Runs {
            fragments: &planted.fragments,
            run,
            block,
            blocks,
        }
    }

    /// The first run of `run` characters of a fragment in `out`.
    pub(crate) fn first_in(&self, out: &str) -> Option<&'p str> {
        let bytes = out.as_bytes();
        if bytes.len() < self.run || self.blocks.is_empty() {
            return None;
        }
        for pos in 0..=bytes.len() - self.block {
            let key = block_key(&bytes[pos..pos + self.block]);
            let first = self.blocks.partition_point(|(k, _, _)| *k < key);
            for &(k, idx, at) in &self.blocks[first..] {
                if k != key {
                    break;
                }
                let fb = self.fragments[idx].as_bytes();
                // Extend the match both ways.
                let mut left = 0;
                while left < at && left < pos && fb[at - left - 1] == bytes[pos - left - 1] {
                    left += 1;
                }
                let mut right = self.block;
                while at + right < fb.len()
                    && pos + right < bytes.len()
                    && fb[at + right] == bytes[pos + right]
                {
                    right += 1;
                }
                if left + right >= self.run {
                    let from = at - left;
                    return self.fragments[idx].get(from..from + left + right);
                }
            }
        }
        None
    }
}
