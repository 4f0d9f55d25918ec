//! The prefilter's triggers are derived from the patterns and agree with
//! them. Matches are generated from each pattern (its look-arounds dropped, the
//! sample set between spaces so word boundaries hold) and every match the
//! automaton finds must start where the scan reports a trigger; the prefiltered
//! search must find what the plain one finds.

use proptest::prelude::*;
use proptest::strategy::Union;

use super::*;
use crate::redact::{Compiled, Kind, RedactMode, Redactor, RedactorConfig, families};

/// The trigger lists kept by hand in `families.rs` before the triggers were derived.
const OLD_TOKEN_TRIGGERS: &[&str] = &[
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "xapp-",
    "pplx-",
    "bb_live_",
    "rk_",
    "pypi-",
    "dop_v1_",
    "doo_v1_",
    "tvly-",
    "retaindb_",
    "hsk-",
    "mem0_",
    "pk-lf-",
    "syt_",
    "GR1348941",
    "glpat-",
    "gloas-",
    "gldt-",
    "glrt-",
    "glrtr-",
    "glcbt-",
    "glptt-",
    "glft-",
    "glimt-",
    "glagent-",
    "glsoat-",
    "glffct-",
    "glwt-",
    "hf_",
    "r8_",
    "npm_",
    "am_",
    "sk_",
    "fal_",
    "fc-",
    "fw-",
    "fw_",
    "exa_",
    "gsk_",
    "brv_",
    "xai-",
    "ntn_",
    "fpk_",
    "AIza",
    "AKIA",
    "ASIA",
    "SG.",
    "gAAAAA",
    "eyJ",
];
const OLD_HEADER_TRIGGERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "apikey",
    "x-api-token",
    "x-auth-token",
    "x-access-token",
    "postgres",
    "mysql",
    "mariadb",
    "mongodb",
    "redis",
    "amqp",
];

/// Configured patterns, one for each way a pattern can be found.
const EXTRAS: &[&str] = &[
    // Tokens: `corp-`.
    r"corp-[a-z0-9]{20}",
    // Lowered: Unicode `(?i)` (its `s` class holds `ſ`, U+017F).
    r"(?i)internal_secret=[A-Z0-9]{12}",
    // With a group: only the group is masked.
    r"tok_id=([A-Za-z0-9]{16,})",
    // Bytes: `#` then digits (too many two-byte literals).
    r"#[0-9]{6}#",
    // Always: it can start with any digit.
    r"[0-9]{4}-[0-9]{4}-SECRET",
];

fn derive(patterns: &[&str]) -> Triggers {
    Triggers::derive(patterns).expect("test patterns are valid")
}

fn strs(patterns: &[(String, Kind)]) -> Vec<&str> {
    patterns.iter().map(|(p, _)| p.as_str()).collect()
}

fn lits(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// `hir` without its look-arounds (proptest cannot generate them).
fn without_looks(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(without_looks(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(cap) => Hir::capture(Capture {
            sub: Box::new(without_looks(&cap.sub)),
            ..cap.clone()
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(without_looks).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(without_looks).collect()),
        _ => hir.clone(),
    }
}

/// `(pattern index, a string the pattern matches)` over all of `patterns`.
fn samples(patterns: &[&str]) -> impl Strategy<Value = (usize, String)> + use<> {
    let arms: Vec<BoxedStrategy<(usize, String)>> = patterns
        .iter()
        .enumerate()
        .map(|(idx, p)| {
            let hir = without_looks(&regex_syntax::parse(p).expect("valid pattern"));
            proptest::string::string_regex_parsed(&hir)
                .expect("pattern can be generated")
                .prop_map(move |s| (idx, s))
                .boxed()
        })
        .collect();
    Union::new(arms)
}

/// Every match of `re` in `text` starts where `triggers`' scans (of every literal,
/// and of match starts) report one.
fn assert_covered(re: &meta::Regex, triggers: &Triggers, text: &str, what: &str) {
    for (mut scan, kind) in [
        (triggers.scan(text), "scan"),
        (triggers.scan_starts(text), "scan of match starts"),
    ] {
        for m in re.find_iter(text) {
            let at = scan.next_from(m.start()).map(|(at, _)| at);
            assert_eq!(
                at,
                Some(m.start()),
                "{what}: match {:?} at {} of {text:?} has no trigger in the {kind}",
                &text[m.range()],
                m.start()
            );
        }
    }
}

/// The prefiltered search of `compiled` finds what its plain search finds.
fn assert_same_matches(compiled: &Compiled, triggers: &Triggers, text: &str) {
    let mut anchored = Vec::new();
    compiled.anchored_matches(triggers, text, None, 0, &mut anchored, |_, _, _| {
        Some(String::new())
    });
    let anchored: Vec<(usize, usize)> = anchored.iter().map(|(s, _, e, _, _)| (*s, *e)).collect();
    let plain: Vec<(usize, usize)> = compiled
        .re
        .find_iter(text)
        .map(|m| (m.start(), m.end()))
        .collect();
    assert_eq!(anchored, plain, "in {text:?}");
}

/// A pattern set compiled, with its triggers and each pattern's own.
struct Set {
    patterns: Vec<String>,
    compiled: Compiled,
    triggers: Triggers,
    own: Vec<(meta::Regex, Triggers)>,
}

impl Set {
    fn new(patterns: &[(String, Kind)]) -> Set {
        let compiled = Compiled::build(patterns).expect("valid patterns");
        let triggers = compiled.triggers().expect("derivable");
        let own = patterns
            .iter()
            .map(|(p, _)| (meta::Regex::new(p).expect("valid"), derive(&[p.as_str()])))
            .collect();
        Set {
            patterns: patterns.iter().map(|(p, _)| p.clone()).collect(),
            compiled,
            triggers,
            own,
        }
    }

    /// The checks of one generated sample of pattern `idx`.
    fn check_sample(&self, idx: usize, text: &str) {
        let p = &self.patterns[idx];
        let (own, own_triggers) = &self.own[idx];
        // Not vacuous: the sample, between spaces, is a match of its pattern.
        assert!(own.is_match(text), "{p} does not match {text:?}");
        // The pattern's own trigger set covers it...
        assert_covered(own, own_triggers, text, p);
        // ... and so does the set's, for every family matching there.
        assert_covered(&self.compiled.re, &self.triggers, text, "the set");
        assert_same_matches(&self.compiled, &self.triggers, text);
    }
}

static CODE: std::sync::LazyLock<Set> =
    std::sync::LazyLock::new(|| Set::new(&families::code_patterns()));
static EXTRA: std::sync::LazyLock<Set> = std::sync::LazyLock::new(|| Set::new(&extra_patterns()));

fn extra_patterns() -> Vec<(String, Kind)> {
    EXTRAS
        .iter()
        .map(|p| ((*p).to_owned(), Kind::Extra(None)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn b30_every_builtin_family_is_covered_by_its_triggers(
        (idx, sample) in samples(&strs(&families::code_patterns())),
        before in "[ -~]{0,12}",
        after in "[ -~]{0,12}",
    ) {
        let text = format!("{before} {sample} {after}");
        CODE.check_sample(idx, &text);
    }

    #[test]
    fn b30_every_configured_pattern_is_covered_by_its_triggers(
        (idx, sample) in samples(EXTRAS),
        before in "[ -~]{0,12}",
        after in "[ -~]{0,12}",
    ) {
        let text = format!("{before} {sample} {after}");
        EXTRA.check_sample(idx, &text);
    }

    /// Random text full of near-misses: the prefiltered search still agrees.
    #[test]
    fn b30_prefiltered_search_agrees_on_noise(
        text in "(?:[ :=+#\"'\\t-]|sk-|ghp_|AKIA|eyJ|[Aa]uthorization|POSTGRES://u:|x-api-|[0-9]|[a-zA-Z_]){0,60}",
    ) {
        for set in [&*CODE, &*EXTRA] {
            assert_same_matches(&set.compiled, &set.triggers, &text);
        }
    }
}

#[test]
fn b30_builtin_families_all_have_a_literal_trigger() {
    let code = families::code_patterns();
    let t = derive(&strs(&code));
    for ((p, _), trigger) in code.iter().zip(t.plan()) {
        assert_ne!(
            *trigger,
            Trigger::Always,
            "{p} would run over all text: give it a literal"
        );
    }
    // One packed search: at most 64 literals, none shorter than three bytes.
    let mut tokens: Vec<Vec<u8>> = t
        .plan()
        .iter()
        .filter_map(|t| match t {
            Trigger::Tokens(l) => Some(l.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    prefix_free(&mut tokens);
    // At most three packed searches over the token literals.
    assert!(
        tokens.len() <= 3 * super::PACKED_LITERALS,
        "{} token literals",
        tokens.len()
    );
    assert!(tokens.iter().all(|l| l.len() >= MIN_LITERAL_LEN));
    // The headers, URLs and secret names: lowercased, copied only for a `:` or
    // `=` (an assignment), a `>` (an XML element's text), a space or a comma
    // (after a flag).
    assert_eq!(t.gate.as_deref(), Some(&b" ,:=>"[..]));
    assert_eq!(
        t.plan()[0],
        Trigger::Lowered(lits(&["authorization", "proxy-authorization"]))
    );
    assert_eq!(
        t.plan()[2],
        Trigger::Lowered(lits(&[
            "amqp",
            "mariadb://",
            "mongodb",
            "mysql://",
            "postgres",
            "redis"
        ]))
    );
    // The phone number: `memchr` for its `+`.
    assert_eq!(t.bytes, b"+");
    // Every literal of the old hand list's families is still found: each old
    // literal starts with a derived one or a derived one starts with it.
    for old in OLD_TOKEN_TRIGGERS {
        assert!(
            tokens
                .iter()
                .any(|lit| lit.starts_with(old.as_bytes()) || old.as_bytes().starts_with(lit)),
            "{old:?} is lost"
        );
    }
}

#[test]
fn b30_each_kind_of_configured_pattern_gets_its_trigger() {
    let t = derive(EXTRAS);
    assert_eq!(
        t.plan(),
        &[
            Trigger::Tokens(lits(&["corp-"])),
            Trigger::Lowered(lits(&["internal_"])),
            Trigger::Tokens(lits(&["tok_id="])),
            Trigger::Bytes(b"#".to_vec()),
            Trigger::Always,
        ]
    );
    // Every `(?i)internal_secret=` match holds a `_` and a `=` (an assignment's
    // `=` is preferred): the lowered copy is made only for texts with a `=`.
    assert_eq!(t.gate.as_deref(), Some(&b"="[..]));
    // The `memchr` searcher takes three bytes; a fourth pattern's always runs.
    let t = derive(&["#[0-9]{5}", "%[0-9]{5}", "![0-9]{5}", "~[0-9]{5}"]);
    assert_eq!(
        t.plan(),
        &[
            Trigger::Bytes(b"#".to_vec()),
            Trigger::Bytes(b"%".to_vec()),
            Trigger::Bytes(b"!".to_vec()),
            Trigger::Always,
        ]
    );
}

#[test]
fn b30_a_pattern_with_no_usable_literal_always_runs_and_is_found() {
    let config = RedactorConfig {
        extra_patterns: vec![r"[0-9]{4}-[0-9]{4}-SECRET".to_owned()],
    };
    let r = Redactor::new(&config).expect("valid");
    let (_, triggers) = r.extra.as_ref().expect("one extra pattern");
    assert_eq!(triggers.plan(), &[Trigger::Always]);
    assert_eq!(
        r.redact(
            "id 1234-5678-SECRET, 12-34 and 9999-8888-SECRET.",
            RedactMode::Code
        ),
        "id ***, 12-34 and ***."
    );
    // Its match starts are triggers: the anchored search starts there.
    let mut scan = triggers.scan("ab 1234-5678-SECRET");
    assert_eq!(scan.next_from(0), Some((3, 0)));
    assert_eq!(scan.next_from(4), None);
    // A case-insensitive pattern with no few bytes every match holds (`A`/`a`,
    // `G`/`g` or `M`/`m`, six): the lowered copy is made for every text.
    let t = derive(&["(?i-u:abcdef|ghijkl|mnopqr)[0-9]{4}"]);
    assert_eq!(
        t.plan(),
        &[Trigger::Lowered(lits(&["abcdef", "ghijkl", "mnopqr"]))]
    );
    assert_eq!(t.gate, None);
    assert_eq!(t.scan("x GhIjKl1234").next_from(0), Some((2, 6)));
}

#[test]
fn b30_a_family_the_old_hand_list_lacked_is_found() {
    // A new token family and a new header family, in neither old list.
    let token = "zzk_Ab3dEf6hIj9kLm2nOp5q";
    let header = "X-Secret-Header: hunter2hunter2hunter2";
    assert!(!OLD_TOKEN_TRIGGERS.iter().any(|t| token.starts_with(t)));
    let lower = header.to_ascii_lowercase();
    assert!(!OLD_HEADER_TRIGGERS.iter().any(|t| lower.starts_with(t)));
    let mut code = families::code_patterns();
    code.push((r"(?-u:\b)zzk_[A-Za-z0-9]{16,}".to_owned(), Kind::Token));
    code.push((
        r"(?-u:\b)(?i-u:x-secret-header)[ \t]*:[ \t]*[^\s]+".to_owned(),
        Kind::HeaderValue,
    ));
    let r = Redactor::build(code, &RedactorConfig::default()).expect("valid");
    let text = format!("run {token}\n{header}\n");
    assert_eq!(
        r.redact(&text, RedactMode::Code),
        "run zzk_Ab...Op5q\nX-Secret-Header: hunter...ter2\n"
    );
    // Without the new families nothing there is a secret.
    assert_eq!(Redactor::builtin().redact(&text, RedactMode::Code), text);
}

#[test]
fn b30_literal_sets_are_prefix_free_and_grouped() {
    let mut v = lits(&["abcd", "ab", "abx", "b", "ba"]);
    prefix_free(&mut v);
    assert_eq!(v, lits(&["ab", "b"]));
    let mut v = lits(&["auth:", "auth=", "authorization", "xoxa-", "xoxb-"]);
    prefix_free(&mut v);
    cut_groups(&mut v);
    assert_eq!(v, lits(&["auth", "xoxa-", "xoxb-"]));
    // The required bytes prefer punctuation and take unions of alternatives.
    let req = |p: &str| required_bytes(&regex_syntax::parse(p).expect("valid"));
    assert_eq!(req(r"(?i-u:abc)[ \t]*[:=]x"), Some(b":=".to_vec()));
    assert_eq!(req(r"ab(?:c|d)"), Some(b"a".to_vec()));
    assert_eq!(req(r"(?:x:|y=)"), Some(b":=".to_vec()));
    assert_eq!(req(r"[a-z]+"), None);
    assert_eq!(req(r"a?"), None);
}

#[test]
fn b30_the_scan_of_match_starts_skips_literals_inside_words() {
    let t = derive(&strs(&families::code_patterns()));
    assert!(t.fast.is_some(), "the built-in literals all fit");
    // `login` (a `.netrc` line) and `ghp_` start at word starts only.
    let text = "test_login ok, xghp_abc; login x password y";
    assert_eq!(t.scan(text).next_from(0), Some((5, 5)));
    assert_eq!(t.scan_starts(text).next_from(0), Some((25, 5)));
}
