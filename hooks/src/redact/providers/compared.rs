//! The shapes taken from a comparison with trufflehog's detectors
//! (`pkg/detectors`, read in December 2026 at commit `3ab759f`): every detector
//! whose token starts with a fixed, provider-specific literal that herd did not
//! already recognise, prefix-anchored like the rest of [`super::TOKENS`], as far as
//! the trigger budget allows (three packed searches of 64 literals), and the
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
        "Figma",
        "personal access token `figp_…`",
        r"figp_[A-Za-z0-9_=-]{40,54}",
        "figp_{A44}",
    ),
    (
        "LangSmith",
        "API key `lsv2_pt_…`, `lsv2_sk_…`",
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        "lsv2_pt_{H32}_{H10}",
    ),
    (
        "NVIDIA",
        "API key `nvapi-…`",
        r"nvapi-[A-Za-z0-9_-]{64}",
        "nvapi-{A64}",
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
        "SonarCloud",
        "token `sqco_…`",
        r"sqco_[A-Za-z0-9]{59}",
        "sqco_{A59}",
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
        "Salesforce (connected app consumer key `3MVG9…`, refresh token `5AEP861…`), Adafruit IO (key `aio_…`), Apify (API token `apify_api_…`), Atlassian (API token `ATCTT3xFfG…`), Endor Labs (API key `endr+…`), Flexport (API key `shltm_…`), Fleetbase (API key `flb_live_…`), New Relic (insights query key `NRIQ-…`, browser key `NRBR-…`), Nightfall (API key `NF-…`), Pagar.me (API key `ak_live_…`), PubNub (publish and subscribe keys `pub-c-…`, `sub-c-…`), Ramp (client id and secret `ramp_id_…`, `ramp_sec_…`), Robinhood Crypto (API key `rh-api-<uuid>`), Rootly (API key `rootly_…`), SaladCloud (API key `salad_cloud_…`), Sourcegraph Cody (gateway key `slk_…`), TruffleHog Enterprise (keys `thog-key-…`, `thog-secret-…`), Ubidots (token `BBFF-…`), Voiceflow (API key `VF.DM.…`, `VF.WS.…`)",
        "the trigger budget: the literal search over clean text is three packed passes of 64 literals, and these rarer providers' prefixes did not fit (a value assigned to a secret-named field or a provider's name is still masked)",
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
        "Compared with trufflehog's detectors (`pkg/detectors`, December 2026): every detector whose token starts with a fixed, provider-specific literal is recognised or listed below with the reason it is not.\n",
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
