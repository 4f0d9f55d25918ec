//! The client's own command line, rewritten after parsing: `herd run -- pkill -f X`
//! must not find (and kill) the herd client that started it, whose command line
//! holds `X` too. As daemons set their titles, the argument area the kernel shows in
//! `/proc/self/cmdline` (between `arg_start` and `arg_end` of `/proc/self/stat`) is
//! overwritten through `/proc/self/mem`: the program's name and the subcommand stay,
//! the rest becomes NUL bytes. This needs no capability (`prctl(PR_SET_MM_ARG_*)`
//! needs `CAP_SYS_RESOURCE`) and no re-exec. Where it fails (no `/proc`, a kernel
//! that refuses the write), the command line stays as it was and a debug line says
//! why.

use std::os::unix::fs::FileExt;

/// Rewrites this process's command line to `ARGV0 WORDS…`, its other arguments
/// gone. Call it after the arguments were parsed into owned values: the program's
/// own `std::env::args` reads the rewritten area from then on (its first item is
/// kept).
pub(crate) fn hide_arguments(words: &[&str]) {
    if let Err(error) = rewrite(words) {
        tracing::debug!(%error, "the command line was not rewritten");
    }
}

fn rewrite(words: &[&str]) -> std::io::Result<()> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let (start, end) = arg_area(&stat).ok_or_else(|| {
        std::io::Error::other("/proc/self/stat does not say where the arguments are")
    })?;
    let len = usize::try_from(end.saturating_sub(start)).map_err(std::io::Error::other)?;
    if len == 0 {
        return Ok(());
    }
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")?;
    let mut area = vec![0_u8; len];
    mem.read_exact_at(&mut area, start)?;
    let title = title(&area, words);
    mem.write_all_at(&title, start)
}

/// The new contents of the argument area `area`: its first string (the program),
/// then `words`, each ending in NUL, then NUL bytes to its end; never longer.
fn title(area: &[u8], words: &[&str]) -> Vec<u8> {
    let program = area.split(|b| *b == 0).next().unwrap_or_default();
    let mut title = Vec::with_capacity(area.len());
    title.extend_from_slice(program);
    title.push(0);
    for word in words {
        title.extend_from_slice(word.as_bytes());
        title.push(0);
    }
    title.resize(area.len(), 0);
    // The last byte stays NUL: the kernel then shows exactly this area.
    if let Some(last) = title.last_mut() {
        *last = 0;
    }
    title
}

/// `arg_start` and `arg_end` from `/proc/self/stat` (fields 48 and 49, counted
/// after the command name in parentheses, which may hold spaces).
fn arg_area(stat: &str) -> Option<(u64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace().skip(45);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_keeps_the_program_and_the_words_and_fits_the_area() {
        let area = b"/usr/bin/herd\0run\0--wait\0--\0pkill -f X\0";
        let got = title(area, &["run"]);
        assert_eq!(got.len(), area.len());
        assert!(got.starts_with(b"/usr/bin/herd\0run\0"));
        assert!(got[18..].iter().all(|b| *b == 0));
        let short = title(b"h\0a\0", &["run", "more"]);
        assert_eq!(short, b"h\0r\0");
        assert_eq!(title(b"h\0a\0", &[]).len(), 4);
    }

    #[test]
    fn the_argument_area_is_read_past_a_name_with_spaces() {
        let mut stat = String::from("123 (a b) c)");
        for n in 3..=52 {
            stat.push_str(&format!(" {n}"));
        }
        assert_eq!(arg_area(&stat), Some((48, 49)));
        assert_eq!(arg_area("1 (x) S 2"), None);
        let own = std::fs::read_to_string("/proc/self/stat").expect("/proc is mounted");
        assert!(arg_area(&own).is_some(), "{own}");
    }
}
