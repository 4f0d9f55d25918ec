//! The shapes taken from a comparison with trufflehog's detectors
//! (`pkg/detectors`, read in December 2026 at commit `3ab759f`): every detector
//! whose token starts with a fixed, provider-specific literal that herd did not
//! already recognise, prefix-anchored like the rest of [`super::TOKENS`], and the
//! detectors left out, each with the reason (`docs/secrets.md` lists both,
//! generated from here; a test checks they agree).
//!
//! Most of trufflehog's ~900 detectors find a provider's key by a keyword near it
//! (`PrefixRegex(["mailgun"])` and 32 hex characters): those are keyword-plus-shape
//! rules, which herd covers for secret-named assignments (`named`) and for
//! provider names (`Providers known by name`) and otherwise leaves out, since a
//! bare 32-hex or 40-alphanumeric run is a digest or an id as often as a key.

/// Prefix-anchored shapes: provider, shape, pattern (after a word boundary), and
/// a sample template (see `super::sample`).
pub(super) const TOKENS: &[(&str, &str, &str, &str)] = &[
    (
        "Adafruit IO",
        "key `aio_…`",
        r"aio_[A-Za-z0-9]{28}",
        "aio_{A28}",
    ),
    (
        "Apify",
        "API token `apify_api_…`",
        r"apify_api_[A-Za-z0-9-]{36}",
        "apify_api_{A36}",
    ),
    (
        "Atlassian",
        "API token `ATCTT3xFfG…`",
        r"ATCTT3xFfG[A-Za-z0-9+/=_-]+=[A-Za-z0-9]{8}",
        "ATCTT3xFfG{A60}={A8}",
    ),
    (
        "Bitbucket Data Center",
        "HTTP access token `BBDC-…`",
        r"BBDC-[A-Za-z0-9+/@_-]{40,50}",
        "BBDC-{A45}",
    ),
    (
        "Buildkite",
        "API token `bkua_…`",
        r"bkua_[a-z0-9]{40}",
        "bkua_{L40}",
    ),
    (
        "CircleCI",
        "personal API token `CCIPAT_…`",
        r"CCIPAT_[A-Za-z0-9]{22}_[a-fA-F0-9]{40}",
        "CCIPAT_{A22}_{H40}",
    ),
    (
        "Cloudflare",
        "global API key `cfk_…`",
        r"cfk_[A-Za-z0-9]{40}[a-f0-9]{8}",
        "cfk_{A40}{H8}",
    ),
    (
        "Contentful",
        "personal access token `CFPAT-…`",
        r"CFPAT-[A-Za-z0-9_-]{43}",
        "CFPAT-{A43}",
    ),
    (
        "Endor Labs",
        "API key `endr+…`",
        r"endr\+[A-Za-z0-9-]{16}",
        "endr+{A16}",
    ),
    (
        "Figma",
        "personal access token `figp_…`",
        r"figp_[A-Za-z0-9_=-]{40,54}",
        "figp_{A44}",
    ),
    (
        "Flexport",
        "API key `shltm_…`",
        r"shltm_[A-Za-z0-9_-]{40}",
        "shltm_{A40}",
    ),
    (
        "Fleetbase",
        "API key `flb_live_…`",
        r"flb_live_[A-Za-z0-9]{20}",
        "flb_live_{A20}",
    ),
    (
        "LangSmith",
        "API key `lsv2_pt_…`, `lsv2_sk_…`",
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        "lsv2_pt_{H32}_{H10}",
    ),
    (
        "New Relic",
        "insights query key `NRIQ-…`, browser key `NRBR-…`",
        r"(?:NRIQ-[A-Za-z0-9_-]{25}|NRBR-[0-9a-f]{19})",
        "NRIQ-{A25}",
    ),
    (
        "Nightfall",
        "API key `NF-…`",
        r"NF-[A-Za-z0-9]{32}(?-u:\b)",
        "NF-{A32}",
    ),
    (
        "NVIDIA",
        "API key `nvapi-…`",
        r"nvapi-[A-Za-z0-9_-]{64}",
        "nvapi-{A64}",
    ),
    (
        "Pagar.me",
        "API key `ak_live_…`",
        r"ak_live_[A-Za-z0-9]{30}",
        "ak_live_{A30}",
    ),
    (
        "Pinecone",
        "API key `pcsk_…`",
        r"pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{63}",
        "pcsk_{A5}_{A63}",
    ),
    (
        "PostHog",
        "personal API key `phx_…`",
        r"phx_[A-Za-z0-9_]{43,48}",
        "phx_{A45}",
    ),
    (
        "PubNub",
        "publish and subscribe keys `pub-c-…`, `sub-c-…`",
        r"(?:pub|sub)-c-[0-9a-z]{8}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{12}",
        "pub-c-{L8}-{L4}-{L4}-{L4}-{L12}",
    ),
    (
        "Ramp",
        "client id and secret `ramp_id_…`, `ramp_sec_…`",
        r"ramp_(?:id_[A-Za-z0-9]{40}|sec_[A-Za-z0-9]{48})",
        "ramp_sec_{A48}",
    ),
    (
        "Robinhood Crypto",
        "API key `rh-api-<uuid>`",
        r"rh-api-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        "rh-api-{H8}-{H4}-{H4}-{H4}-{H12}",
    ),
    (
        "Rootly",
        "API key `rootly_…`",
        r"rootly_[a-f0-9]{64}",
        "rootly_{H64}",
    ),
    (
        "SaladCloud",
        "API key `salad_cloud_…`",
        r"salad_cloud_[0-9A-Za-z]{1,7}_[0-9A-Za-z]{7,235}",
        "salad_cloud_{A5}_{A40}",
    ),
    (
        "Salesforce",
        "connected app consumer key `3MVG9…`, refresh token `5AEP861…`",
        r"(?:3MVG9[0-9A-Za-z._+/=]{80,251}|5AEP861[A-Za-z0-9._=]{80,})",
        "5AEP861{A90}",
    ),
    (
        "SonarCloud",
        "token `sqco_…`",
        r"sqco_[A-Za-z0-9]{59}",
        "sqco_{A59}",
    ),
    (
        "Sourcegraph Cody",
        "gateway key `slk_…`",
        r"slk_[a-f0-9]{64}",
        "slk_{H64}",
    ),
    (
        "Supabase",
        "access token `sbp_…`",
        r"sbp_[a-z0-9]{40}",
        "sbp_{L40}",
    ),
    (
        "Tailscale",
        "keys `tskey-<kind>-…-…`",
        r"tskey-[a-z]+-[0-9A-Za-z_]{4,}-[0-9A-Za-z_]{16,}",
        "tskey-auth-{A12}-{A30}",
    ),
    (
        "TruffleHog Enterprise",
        "keys `thog-key-…`, `thog-secret-…`",
        r"thog-(?:key-[0-9a-f]{16}|secret-[0-9a-f]{32})",
        "thog-secret-{H32}",
    ),
    (
        "Ubidots",
        "token `BBFF-…`",
        r"BBFF-[0-9A-Za-z]{30}",
        "BBFF-{A30}",
    ),
    (
        "Voiceflow",
        "API key `VF.DM.…`, `VF.WS.…`",
        r"VF\.(?:(?:DM|WS)\.)?[a-fA-F0-9]{24}\.[A-Za-z0-9]{16}",
        "VF.DM.{H24}.{A16}",
    ),
];

/// trufflehog detectors with a fixed prefix that herd does not take as its own
/// rule, and why.
#[cfg(test)]
pub(super) const LEFT_OUT: &[(&str, &str)] = &[
    (
        "`caflou` (`eyJhbGciOiJIUzI1NiJ9…`), `flightlabs` (`eyJ0eXAiOiJKV1Qi…`)",
        "JSON Web Tokens: the JWT family masks them",
    ),
    (
        "`couchbase` (`cb.….cloud.couchbase.com`), `datadog*` (`api.datadoghq.com`), `salesforce` instance URLs, `sumologickey`, `saucelabs` and the other host or URL patterns",
        "a host name, not a secret (the detectors use it to verify a key found elsewhere)",
    ),
    (
        "`dfuse` (`web_` and 32 characters)",
        "`web_` begins ordinary identifiers (`web_server_…`): too common a literal",
    ),
    (
        "`dotdigital` (`apiuser-…@apiconnector.com`)",
        "a user name, not a secret",
    ),
    (
        "`flyio` (`FlyV1 fm…`)",
        "the token after `FlyV1 ` is masked by the Fly.io family (`fm2_…`)",
    ),
    (
        "`fullstory` (`na1.` and 100 base64 characters)",
        "`na1.` begins host names (`na1.example.com`): too common a literal",
    ),
    (
        "`gemini` (`master-`, `account-` and 20 characters)",
        "ordinary words as prefixes: would mask identifiers",
    ),
    (
        "`googlegemini` (`AIzaSy…`), `grafana` (`glc_eyJ…`), `openaiadmin` (`sk-admin-…`), `openrouter` (`sk-or-v1-…`), `anthropic` (`sk-ant-…`)",
        "already masked by a shorter prefix (`AIza`, `glc_`, `sk-`)",
    ),
    (
        "`intra42` (`u-s4t2ud-…`)",
        "a client id, public by design (the secret `s-s4t2ud-…` is masked)",
    ),
    (
        "`razorpay` (`rzp_live_…`), `stripepaymentintent` (`pk_live_…`), `squareapp` (`sq0idp-…`)",
        "key ids and publishable keys, public by design (their secrets `sk_live_…`, `sq0csp-…` are masked)",
    ),
    (
        "`zohocrm` (`1000.` and two 32-hex parts)",
        "`1000.` is a number in ordinary text: too common a literal",
    ),
    (
        "`ftp`, `ldap`, `mongodb`, `postgres`, `rabbitmq`, `redis`, `jdbc`, `uri` (URL userinfo)",
        "the URL family masks the password of every scheme, and JDBC passwords are secret-named values",
    ),
    (
        "`azureappconfigconnectionstring` (`Endpoint=…;Id=…;Secret=…`)",
        "the `Secret=` value is a secret-named value",
    ),
    (
        "the ~800 detectors with no fixed prefix (`PrefixRegex([\"name\"])` and a shape)",
        "a keyword near a hex or alphanumeric run: would mask digests and ids; provider names and secret-named assignments are covered",
    ),
];

/// The comparison section of `docs/secrets.md`, generated from [`LEFT_OUT`] and
/// [`TOKENS`].
#[cfg(test)]
pub(super) fn markdown() -> String {
    let mut out = String::from(
        "Compared with trufflehog's detectors (`pkg/detectors`, December 2026): every detector whose token starts with a fixed, provider-specific literal is recognised.\n",
    );
    out.push_str("Added from the comparison: ");
    let added: Vec<String> = TOKENS
        .iter()
        .map(|(provider, shape, _, _)| format!("{provider} ({shape})"))
        .collect();
    out.push_str(&added.join(", "));
    out.push_str(".\n\n| Left out | Why |\n| --- | --- |\n");
    for (detectors, why) in LEFT_OUT {
        out.push_str(&format!("| {detectors} | {why} |\n"));
    }
    out
}
