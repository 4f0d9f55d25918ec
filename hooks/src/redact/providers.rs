//! Provider-specific token shapes beyond the first families, each anchored on the
//! provider's own prefix where it has one (so the trigger scan, not the automaton,
//! pays for clean text), with the provider's name and a description of the shape:
//! the table in `docs/secrets.md` is generated from [`catalog`] (a test checks
//! they agree).
//!
//! The list follows the provider-specific rules of the common secret scanners
//! (gitleaks' default rule set, trufflehog's detectors); their generic
//! keyword-and-entropy rules are left out on purpose (they would mask ordinary
//! code). Shapes a provider only recognises near its name (a 32-character hex
//! string after `mailgun`) are covered by one family: a value assigned to a name
//! that contains the provider's name ([`named_value_pattern`]).

use super::Kind;

mod compared;
mod files;
mod named;

pub(crate) use files::file_line_matches;
pub(crate) use named::{names_a_value, replace as named_value};

/// Word boundary that keeps the DFA fast (ASCII semantics).
const B: &str = r"(?-u:\b)";

/// One recognised shape: who issues it, what it looks like, its pattern and how
/// a match is masked, and a made-up sample (the corpus test masks every one).
pub(crate) struct Shape {
    pub(crate) provider: &'static str,
    pub(crate) shape: &'static str,
    pub(crate) pattern: String,
    pub(crate) kind: Kind,
    /// Only in environment dumps and secret files (`RedactMode::SecretDump`): a
    /// family whose trigger words are common enough to cost ordinary output.
    pub(crate) dump_only: bool,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the corpus test masks every sample")
    )]
    pub(crate) sample: String,
}

/// `n` characters cycling through `alphabet` (samples only).
fn fill(alphabet: &str, n: usize) -> String {
    alphabet.chars().cycle().take(n).collect()
}

const HEX: &str = "0a1b2c3d4e5f6789";
const ALNUM: &str = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY";
const UPPER: &str = "AB3DE5FG7HJ9KL2MN4PQ6RS8TU0VW1XY";

/// The prefix-anchored token shapes: provider, shape, pattern (after a word
/// boundary), and a sample template (`{A32}`: 32 mixed-case alphanumerics, `{U6}`:
/// upper-case, `{H64}`: hex, `{L10}`: lower-case alphanumerics, `{M34}`: letters, `{B16}`: base32).
const TOKENS: &[(&str, &str, &str, &str)] = &[
    // (Two classes of at most ten, so each start is a three-byte literal.)
    (
        "Twilio",
        "API key SIDs `SK…` (32 hex)",
        r"SK(?:[0-9][0-9a-f]{31}|[a-f][0-9a-f]{31})(?-u:\b)",
        "SK{H32}",
    ),
    (
        "1Password",
        "secret key `A3-XXXXXX-…`",
        r"A3-[A-Z0-9]{6}-[A-Z0-9-]{17,40}",
        "A3-{U6}-{U23}",
    ),
    (
        "1Password",
        "service account token `ops_eyJ…`",
        r"ops_eyJ[A-Za-z0-9+/=_-]{40,}",
        "ops_eyJ{A60}",
    ),
    (
        "Adobe",
        "client secret `p8e-…`",
        r"p8e-[A-Za-z0-9]{32}",
        "p8e-{A32}",
    ),
    (
        "age",
        "secret key `AGE-SECRET-KEY-1…`",
        r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
        "AGE-SECRET-KEY-1{U58}",
    ),
    (
        "Airtable",
        "personal access token `pat….<64 hex>`",
        r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}(?-u:\b)",
        "pat{A14}.{H64}",
    ),
    (
        "AWS",
        "Amazon Bedrock API keys `ABSK…`, `bedrock-api-key-…`",
        r"(?:ABSK[A-Za-z0-9+/]{109,269}={0,2}|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%_-]{16,})",
        "ABSK{A120}",
    ),
    (
        "Alibaba Cloud",
        "AccessKey ID `LTAI…`",
        r"LTAI[A-Za-z0-9]{20}",
        "LTAI{A20}",
    ),
    (
        "Artifactory",
        "API key `AKCp…`",
        r"AKCp[A-Za-z0-9]{60,}",
        "AKCp{A69}",
    ),
    (
        "Artifactory",
        "reference token `cmVmd…`",
        r"cmVmd[A-Za-z0-9]{59}",
        "cmVmd{A59}",
    ),
    (
        "Atlassian",
        "API token `ATATT3…`",
        r"ATATT3[A-Za-z0-9_=-]{100,}",
        "ATATT3{A186}",
    ),
    (
        "Authress",
        "service client key `authress_….acc_…`, `scauth_…`",
        r"(?:scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
        "authress_{L10}.{L5}.acc_{L16}.{A40}",
    ),
    (
        "AWS",
        "access key ID `AKIA…`, `ASIA…`, `ABIA…`, `ACCA…`, `A3T…`",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?-u:\b)",
        "ABIA{B16}",
    ),
    (
        "ClickHouse Cloud",
        "API secret `4b1d…`",
        r"4b1d[A-Za-z0-9]{38}",
        "4b1d{A38}",
    ),
    (
        "Clojars",
        "API token `CLOJARS_…`",
        r"CLOJARS_[A-Za-z0-9]{60}",
        "CLOJARS_{A60}",
    ),
    (
        "Cloudflare",
        "origin CA key `v1.0-…`",
        r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        "v1.0-{H24}-{H146}",
    ),
    (
        "Databricks",
        "API token `dapi…`",
        r"dapi[a-f0-9]{32}(?:-[0-9])?",
        "dapi{H32}",
    ),
    (
        "Defined Networking",
        "API token `dnkey-…`",
        r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}",
        "dnkey-{A26}-{A52}",
    ),
    (
        "DigitalOcean",
        "OAuth refresh token `dor_v1_…`",
        r"dor_v1_[a-f0-9]{64}",
        "dor_v1_{H64}",
    ),
    (
        "Discord",
        "webhook URL `discord.com/api/webhooks/…`",
        r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/[A-Za-z0-9_-]{30,}",
        "discord.com/api/webhooks/123456789012345678/{A68}",
    ),
    (
        "Docker Hub",
        "access token `dckr_pat_…`, `dckr_oat_…`",
        r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
        "dckr_pat_{A27}",
    ),
    (
        "Doppler",
        "API token `dp.pt.…` (and `dp.st.`, `dp.ct.`, …)",
        r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}",
        "dp.pt.{A43}",
    ),
    (
        "Duffel",
        "API token `duffel_live_…`",
        r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        "duffel_live_{A43}",
    ),
    (
        "Dynatrace",
        "API token `dt0c01.…`",
        r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
        "dt0c01.{U24}.{U64}",
    ),
    (
        "EasyPost",
        "API key `EZAK…`, `EZTK…`",
        r"EZ[AT]K[A-Za-z0-9]{54}",
        "EZAK{A54}",
    ),
    (
        "Facebook / Square",
        "access token `EAAC…`, `EAAM…`, `EAAA…`",
        r"EAA[ACM][A-Za-z0-9_-]{22,}",
        "EAAM{A100}",
    ),
    (
        "Flutterwave",
        "keys `FLWSECK_TEST-…`, `FLWPUBK_TEST-…`",
        r"FLW(?:SECK|PUBK)_TEST-[A-Za-z0-9]{12,32}(?:-X)?",
        "FLWSECK_TEST-{H32}-X",
    ),
    (
        "Fly.io",
        "tokens `fo1_…`, `fm1a_…`, `fm2_…`",
        r"(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{40,}={0,3})",
        "fm2_{A120}",
    ),
    (
        "Frame.io",
        "API token `fio-u-…`",
        r"fio-u-[A-Za-z0-9_=-]{64}",
        "fio-u-{A64}",
    ),
    (
        "GitLab",
        "session cookie `_gitlab_session=…`",
        r"_gitlab_session=[0-9a-z]{32}",
        "_gitlab_session={H32}",
    ),
    (
        "Google",
        "OAuth access token `ya29.…`",
        r"ya29\.[A-Za-z0-9_-]{20,}",
        "ya29.{A80}",
    ),
    (
        "Google",
        "OAuth client secret `GOCSPX-…`",
        r"GOCSPX-[A-Za-z0-9_-]{20,}",
        "GOCSPX-{A28}",
    ),
    (
        "Google",
        "OAuth refresh token `1//0…`",
        r"1//0[A-Za-z0-9_-]{30,}",
        "1//0{A60}",
    ),
    (
        "Grafana",
        "cloud API token `glc_…`",
        r"glc_[A-Za-z0-9+/]{32,}={0,3}",
        "glc_{A60}",
    ),
    (
        "Grafana",
        "service account token `glsa_…`",
        r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        "glsa_{A32}_{H8}",
    ),
    (
        "Grafana",
        "API key `eyJrIjoi…`",
        r"eyJrIjoi[A-Za-z0-9]{40,}={0,3}",
        "eyJrIjoi{A80}",
    ),
    (
        "Harness",
        "access token `pat.….….…`",
        r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
        "pat.{A22}.{A24}.{A20}",
    ),
    (
        "HashiCorp Vault",
        "tokens `hvs.…`, `hvb.…`, `hvr.…`",
        r"hv[sbr]\.[A-Za-z0-9_-]{24,}",
        "hvs.{A95}",
    ),
    (
        "Heroku",
        "API key `HRKU-AA…`",
        r"HRKU-AA[0-9A-Za-z_-]{58}",
        "HRKU-AA{A58}",
    ),
    (
        "Hugging Face",
        "organization token `api_org_…`",
        r"api_org_[A-Za-z]{34}",
        "api_org_{M34}",
    ),
    (
        "Infracost",
        "API token `ico-…`",
        r"ico-[A-Za-z0-9]{32}",
        "ico-{A32}",
    ),
    (
        "Intra42",
        "client secret `s-s4t2ud-…`",
        r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
        "s-s4t2ud-{H64}",
    ),
    (
        "JWT",
        "base64-encoded JWT `ZXlK…`",
        r"ZXlK[A-Za-z0-9+/_-]{40,}={0,2}",
        "ZXlK{A60}",
    ),
    (
        "Linear",
        "API key `lin_api_…`",
        r"lin_api_[A-Za-z0-9]{40}",
        "lin_api_{A40}",
    ),
    (
        "Mailgun",
        "API keys `key-…`, `pubkey-…`",
        r"(?:pub)?key-[a-f0-9]{32}(?-u:\b)",
        "key-{H32}",
    ),
    (
        "Mapbox",
        "tokens `pk.eyJ…`, `sk.eyJ…`",
        r"[ps]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",
        "sk.eyJ{A60}.{A22}",
    ),
    (
        "Microsoft Teams",
        "incoming webhook URL",
        r"webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{40,}",
        "webhook.office.com/webhookb2/{A120}",
    ),
    (
        "New Relic",
        "keys `NRAK-…`, `NRII-…`, `NRJS-…`",
        r"NR(?:AK-[A-Za-z0-9]{27}|II-[A-Za-z0-9-]{32}|JS-[a-f0-9]{19})",
        "NRAK-{U27}",
    ),
    (
        "Octopus Deploy",
        "API key `API-…`",
        r"API-[A-Z0-9]{26}(?-u:\b)",
        "API-{U26}",
    ),
    (
        "OpenShift",
        "user token `sha256~…`",
        r"sha256~[A-Za-z0-9_-]{43}",
        "sha256~{A43}",
    ),
    (
        "PlanetScale",
        "tokens `pscale_tkn_…`, `pscale_oauth_…`, `pscale_pw_…`",
        r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}",
        "pscale_pw_{A43}",
    ),
    (
        "Postman",
        "API key `PMAK-…`",
        r"PMAK-[A-Za-z0-9]{24}-[A-Za-z0-9]{34}",
        "PMAK-{H24}-{H34}",
    ),
    (
        "Private keys",
        "base64 of a PEM private key on one line (`LS0tLS1CRUdJTiBQUklWQVRF…`, a Kubernetes secret's `tls.key`)",
        r"LS0tLS1CRUdJTiB(?:QUklWQVRF|SU0EgUFJJVkFURS|FQyBQUklWQVRF|PUEVOU1NIIFBSSVZBVEUg|EU0EgUFJJVkFURS|FTkNSWVBURUQgUFJJVkFURS|QR1AgUFJJVkFURS)[A-Za-z0-9+/=]{20,}",
        "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t{A80}",
    ),
    (
        "Prefect",
        "API token `pnu_…`",
        r"pnu_[A-Za-z0-9]{36}",
        "pnu_{A36}",
    ),
    (
        "Pulumi",
        "access token `pul-…`",
        r"pul-[a-f0-9]{40}",
        "pul-{H40}",
    ),
    (
        "ReadMe",
        "API key `rdme_…`",
        r"rdme_[a-z0-9]{70}",
        "rdme_{L70}",
    ),
    (
        "RubyGems",
        "API key `rubygems_…`",
        r"rubygems_[a-f0-9]{48}",
        "rubygems_{H48}",
    ),
    (
        "Scalingo",
        "API token `tk-us-…`",
        r"tk-us-[A-Za-z0-9_-]{48}",
        "tk-us-{A48}",
    ),
    (
        "Sendinblue / Brevo",
        "API key `xkeysib-…`, `xsmtpsib-…`",
        r"x(?:key|smtp)sib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "xkeysib-{H64}-{A16}",
    ),
    (
        "Sentry",
        "tokens `sntrys_…`, `sntryu_…`",
        r"sntry[su]_[A-Za-z0-9+/=_]{40,}",
        "sntryu_{H64}",
    ),
    (
        "SettleMint",
        "tokens `sm_aat_…`, `sm_pat_…`, `sm_sat_…`",
        r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}",
        "sm_pat_{A16}",
    ),
    (
        "Shippo",
        "API token `shippo_live_…`",
        r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
        "shippo_live_{H40}",
    ),
    (
        "Shopify",
        "tokens `shpat_…`, `shpca_…`, `shppa_…`, `shpss_…`",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        "shpat_{H32}",
    ),
    (
        "Slack",
        "webhook URL `hooks.slack.com/services/…`",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
        "hooks.slack.com/services/T0000/B0000/{A24}",
    ),
    (
        "Slack",
        "configuration tokens `xoxe.xoxp-…`, `xoxe-…`",
        r"xoxe(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{100,}",
        "xoxe.xoxp-1-{U163}",
    ),
    (
        "Slack",
        "legacy tokens `xoxo-…`",
        r"xoxo-[0-9A-Za-z-]{10,}",
        "xoxo-{H40}",
    ),
    (
        "Sourcegraph",
        "access token `sgp_…`",
        r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}",
        "sgp_{H40}",
    ),
    (
        "Square",
        "tokens `sq0atp-…`, `sq0csp-…`",
        r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}",
        "sq0atp-{A22}",
    ),
    (
        "Stripe",
        "keys `sk_prod_…`, `rk_prod_…`, webhook secret `whsec_…`",
        r"(?:[sr]k_prod_|whsec_)[A-Za-z0-9]{16,}",
        "whsec_{A32}",
    ),
    (
        "Typeform",
        "API token `tfp_…`",
        r"tfp_[A-Za-z0-9_.=-]{40,}",
        "tfp_{A59}",
    ),
    (
        "Yandex",
        "API key `AQVN…`, IAM token `t1.…`",
        r"(?:AQVN[A-Za-z0-9_-]{35,38}|t1\.[A-Za-z0-9_-]+=*\.[A-Za-z0-9_-]{86}=*)",
        "AQVN{A36}",
    ),
];

/// A sample from a template of [`TOKENS`].
fn sample(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').unwrap_or(rest.len() - open);
        let spec = &rest[open + 1..close];
        let n: usize = spec.get(1..).and_then(|n| n.parse().ok()).unwrap_or(0);
        let alphabet = match spec.as_bytes().first() {
            Some(b'U') => UPPER,
            Some(b'H') => HEX,
            Some(b'L') => "ab12cd34",
            Some(b'M') => "abcdEFGHijklMNOP",
            Some(b'B') => "ABCDEFGHIJKLMN234567",
            _ => ALNUM,
        };
        out.push_str(&fill(alphabet, n));
        rest = rest.get(close + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// Every provider shape of this module.
pub(crate) fn catalog() -> Vec<Shape> {
    let mut all: Vec<Shape> = TOKENS
        .iter()
        .chain(compared::TOKENS)
        .map(|(provider, shape, re, template)| Shape {
            provider,
            shape,
            pattern: format!("{B}{re}"),
            kind: Kind::Token,
            dump_only: false,
            sample: sample(template),
        })
        .collect();
    all.extend(headers());
    all
}

/// Header and assignment shapes: the name is kept, the value masked.
fn headers() -> Vec<Shape> {
    vec![
        Shape {
            provider: "HTTP",
            shape: "cookie headers `Cookie: a=…; b=…`, `Set-Cookie: a=…` (every value)",
            pattern: format!(r#"{B}(?i-u:set-cookie|cookie)["']?[ \t]*:[ \t]*[^\r\n"']+"#),
            kind: Kind::Cookie,
            dump_only: false,
            sample: format!("Cookie: session={}; theme=dark", fill(ALNUM, 32)),
        },
        Shape {
            provider: "HTTP",
            shape: "token headers `PRIVATE-TOKEN:`, `X-Vault-Token:`, `X-Gitlab-Token:`, `X-Figma-Token:`, `X-Shopify-Access-Token:`, `X-Amz-Security-Token:`",
            pattern: format!(
                r#"{B}(?i-u:private-token|x-vault-token|x-gitlab-token|x-figma-token|x-shopify-access-token|x-amz-security-token|x-api-secret|x-consul-token|x-nomad-token)["']?[ \t]*[:=][ \t]*["']?[^\s"',;&]+"#
            ),
            kind: Kind::HeaderValue,
            dump_only: false,
            sample: format!("PRIVATE-TOKEN: {}", fill(ALNUM, 20)),
        },
        Shape {
            provider: "Azure",
            shape: "connection strings `AccountKey=…`, `SharedAccessKey=…`, SAS `sig=…`",
            pattern: format!(r"{B}(?i-u:accountkey|sharedaccesskey|sig)=[A-Za-z0-9%+/=]{{20,}}"),
            kind: Kind::HeaderValue,
            dump_only: false,
            sample: format!("AccountKey={}==", fill(ALNUM, 86)),
        },
        Shape {
            provider: ".netrc",
            shape: "the password of `machine … login … password …` on one line (and, in the file read whole, of a `password …` line)",
            pattern: format!(r"{B}login[ \t]+[^\s]+[ \t]+password[ \t]+([^\s]+)"),
            kind: group_kind(r"password[ \t]+([^\s]+)"),
            dump_only: false,
            sample: format!("machine api.example.com login me password {}", fill(ALNUM, 20)),
        },
        Shape {
            provider: "NuGet",
            shape: "a `NuGet.Config` password `<add key=\"ClearTextPassword\" value=\"…\" />`",
            pattern: r#"(?i-u:<add[ \t]+key=\\?"(?:cleartext)?password\\?")[ \t]+(?i-u:value)=\\?"([^"\\\r\n]{1,256})\\?""#.to_owned(),
            kind: group_kind(r#"(?i)value=\\?"([^"\\]+)"#),
            dump_only: false,
            sample: format!("<add key=\"ClearTextPassword\" value=\"{}\" />", fill(ALNUM, 20)),
        },
        Shape {
            provider: "Docker",
            shape: "registry credentials in `config.json`: `\"auth\": \"<base64>\"`",
            pattern: r#""auth"[ \t]*:[ \t]*"((?:[A-Za-z0-9+/]{4}){3,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)""#.to_owned(),
            kind: group_kind(r#":[ \t]*"([^"]+)""#),
            dump_only: false,
            sample: format!("{{\"auths\": {{\"r.example.com\": {{\"auth\": \"{}==\"}}}}}}", fill(ALNUM, 30)),
        },
        Shape {
            provider: "PostgreSQL",
            shape: "the password of a `.pgpass` line `host:port:database:user:password` printed anywhere (five fields, the port a number or `*`; a `grep -n` or path prefix kept)",
            pattern: format!(r"{B}[A-Za-z0-9._*-]+:(?:[0-9]+|\*):[^:\s]+:[^:\s]+:([^\s]+)"),
            kind: group_kind(r"^(?:[^:]+:){4}(.+)$"),
            dump_only: true,
            sample: format!("db.example.com:5432:app:app:{}", fill(ALNUM, 20)),
        },
        Shape {
            provider: ".netrc",
            shape: "the password of a `.netrc` line printed anywhere that holds netrc pairs only (`  password …` alone, `default login … password …`; a `grep -n` or path prefix kept)",
            pattern: r"(?m)^[ \t]*(?:password|passwd)[ \t]+([^\s]+)".to_owned(),
            kind: group_kind(r"(?:password|passwd)[ \t]+([^\s]+)"),
            dump_only: true,
            sample: format!("machine api.example.com\n  login me\n  password {}", fill(ALNUM, 20)),
        },
        named::shape(),
        Shape {
            provider: "Providers known by name",
            shape: "in environment dumps and secret files, a long value assigned to a name holding a provider's name (`MAILGUN_KEY=…`, `\"datadog_api_key\": \"…\"`): Adafruit, Airtable, Algolia, Asana, Atlassian/Jira/Confluence, Beamer, Bitbucket, Bittrex, Cloudflare, Codecov, Cohere, Coinbase, Confluent, Contentful, Datadog, Discord, Drone CI, Dropbox, Etsy, Facebook, Fastly, Finicity, Finnhub, Flickr, Freshbooks, Gitter, GoCardless, Heroku, HubSpot, Intercom, JFrog, Kraken, KuCoin, LaunchDarkly, Linear, LinkedIn, Mailchimp, Mailgun, Mapbox, Mattermost, MessageBird, Meraki, Netlify, New Relic, NYTimes, Okta, Plaid, PrivateAI, RapidAPI, Sendbird, Sentry, Snyk, Sonar, Squarespace, Sumo Logic, Telegram, Travis CI, Twilio, Twitch, Twitter, Typeform, Yandex, Zendesk",
            pattern: named_value_pattern(),
            kind: Kind::NamedValue,
            dump_only: true,
            sample: format!("MAILGUN_SIGNING_KEY={}", fill(HEX, 32)),
        },
    ]
}

/// A kind that masks group 1 of `pattern` (fixed, and covered by the corpus test).
fn group_kind(pattern: &str) -> Kind {
    Kind::Extra(regex::Regex::new(pattern).ok().map(std::sync::Arc::new))
}

/// Provider names whose nearby assignment holds one of their secrets.
const PROVIDER_NAMES: &str = "adafruit|airtable|algolia|asana|atlassian|confluence|jira|beamer|bitbucket|bittrex|meraki|cloudflare|codecov|cohere|coinbase|confluent|contentful|datadog|discord|droneci|dropbox|etsy|facebook|fastly|finicity|finnhub|flickr|freshbooks|gitter|gocardless|heroku|hubspot|intercom|jfrog|artifactory|kraken|kucoin|launchdarkly|linear|linkedin|mailchimp|mailgun|mapbox|mattermost|messagebird|netlify|newrelic|new_relic|nytimes|okta|plaid|privateai|private_ai|rapidapi|sendbird|sentry|snyk|sonar|squarespace|sumo|telegram|travis|twilio|twitch|twitter|typeform|yandex|zendesk";

/// `<…provider…_KEY> = <16+ token characters>` (the name kept, the value masked).
fn named_value_pattern() -> String {
    format!(
        r#"{B}(?i-u:{PROVIDER_NAMES})[A-Za-z0-9_.-]{{0,30}}["']?[ \t]*[:=][=>]?[ \t]*["'`]?[A-Za-z0-9_./+=-]{{16,}}"#
    )
}

/// The comparison section of `docs/secrets.md` (what was compared with which
/// scanner, what was added, what was left out and why), generated from the code.
#[cfg(test)]
pub(crate) fn comparison_markdown() -> String {
    compared::markdown()
}

/// The table of `docs/secrets.md`: every recognised shape, generated from the code.
pub(crate) fn markdown_table(builtin: &[(&str, &str)]) -> String {
    let mut out = String::from("| Provider | What is masked |\n| --- | --- |\n");
    let mut rows: Vec<(String, String)> = builtin
        .iter()
        .map(|(p, s)| ((*p).to_owned(), (*s).to_owned()))
        .collect();
    rows.extend(
        catalog()
            .into_iter()
            .map(|s| (s.provider.to_owned(), s.shape.to_owned())),
    );
    rows.sort();
    for (provider, shape) in rows {
        out.push_str(&format!("| {provider} | {} |\n", shape.replace('|', "\\|")));
    }
    out
}

#[cfg(test)]
mod tests;
