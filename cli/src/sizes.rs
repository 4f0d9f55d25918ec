//! Sizes and counts a user gives for the bounds of a job's tree (`--memory`,
//! `--cpus`, `--pids`; MCP arguments; config `[limits]`), parsed one way for all.

/// Parses `--memory`: bytes with an optional K, M, G or T suffix (powers of 1024),
/// 1 MiB to 1 PiB.
pub(crate) fn parse_memory(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let scale: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown unit in `{text}`: use K, M, G or T")),
            };
            (&t[..i], scale)
        }
        _ => (t, 1),
    };
    let n: f64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size: give e.g. 512M or 2G"))?;
    let bytes = n * scale as f64;
    if !(bytes >= f64::from(1u32 << 20) && bytes <= (1u64 << 50) as f64) {
        return Err(format!("`{text}` is out of range: give 1M to 1024T"));
    }
    Ok(bytes as u64)
}

/// The most processes and threads a `--pids` limit may allow.
pub(crate) const PIDS_MAX: u64 = 4_194_304;

/// Parses `--cpus`: a number of CPUs, 0.01 to 1024, kept in thousandths.
pub(crate) fn parse_cpus(text: &str) -> Result<u64, String> {
    let n: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of CPUs: give e.g. 1.5"))?;
    if !(0.01..=1024.0).contains(&n) {
        return Err(format!("`{text}` is out of range: give 0.01 to 1024 CPUs"));
    }
    Ok((n * 1000.0).round() as u64)
}

/// Parses a restart delay (`500ms`, `2s`, `1.5`, `1m`) into milliseconds, 100 ms to
/// 5 minutes.
pub(crate) fn parse_restart_delay(text: &str) -> Result<u64, String> {
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (text, 1000.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("expected a delay like 500ms, 2s or 1m, got `{text}`"))?;
    let ms = value * unit_ms;
    if ms.is_finite() && (100.0..=300_000.0).contains(&ms) {
        Ok(ms.round() as u64)
    } else {
        Err(format!(
            "the restart delay must be from 100ms to 5m (got `{text}`)"
        ))
    }
}
