//! The provider table: one sample per shape masked, the shapes a fresh corpus found
//! unrecognised, an over-masking corpus, and `docs/secrets.md` agreeing with the code.

use super::{catalog, comparison_markdown, markdown_table};
use crate::redact::families::BUILTIN_ROWS;
use crate::{RedactMode, Redactor};

/// The longest run of ASCII alphanumerics in `sample` (its secret part).
fn secret_of(sample: &str) -> &str {
    sample
        .split(|c: char| !c.is_ascii_alphanumeric())
        .max_by_key(|part| part.len())
        .unwrap_or(sample)
}

/// The first 10-character piece of `secret` that `out` shows, if any.
fn leak(out: &str, secret: &str) -> Option<String> {
    secret
        .as_bytes()
        .windows(10)
        .find(|w| out.as_bytes().windows(10).any(|o| o == *w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

#[test]
fn b30_one_sample_per_recognised_provider_is_masked() {
    let redactor = Redactor::builtin();
    for shape in catalog() {
        let secret = secret_of(&shape.sample);
        for text in [
            format!("{}\n", shape.sample),
            format!("got {} from the vault", shape.sample),
            format!("{{\"value\": \"{}\"}}", shape.sample),
        ] {
            let mode = if shape.dump_only {
                RedactMode::SecretDump
            } else {
                RedactMode::Code
            };
            let out = redactor.redact(&text, mode);
            assert!(
                leak(&out, secret).is_none(),
                "{} ({}) leaks through: {out}",
                shape.provider,
                shape.shape
            );
        }
    }
}

#[test]
fn b30_the_shapes_the_tester_found_unrecognised_are_masked() {
    let redactor = Redactor::builtin();
    let samples = [
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        (
            "whsec_AbCdEfGh1234567890AbCdEfGh12",
            "AbCdEfGh1234567890AbCdEfGh12",
        ),
        (
            "ya29.a0AfH6SMBx1234567890abcdefghijklmnopqrstuv",
            "a0AfH6SMBx1234567890abcdefghijklmnopqrstuv",
        ),
        (
            "GOCSPX-1234567890abcdefghijklmnopqr",
            "1234567890abcdefghijklmnopqr",
        ),
        (
            "shpat_0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "dckr_pat_AbCdEf1234567890AbCdEf12345",
            "AbCdEf1234567890AbCdEf12345",
        ),
        (
            "hvs.CAESIAbCdEf1234567890AbCdEf1234567890",
            "CAESIAbCdEf1234567890AbCdEf1234567890",
        ),
        (
            "glsa_AbCdEf1234567890AbCdEf1234567890_0a1b2c3d",
            "AbCdEf1234567890AbCdEf1234567890",
        ),
        (
            "sntryu_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        (
            "lin_api_AbCdEf1234567890AbCdEf1234567890AbCdEf12",
            "AbCdEf1234567890AbCdEf1234567890AbCdEf12",
        ),
        (
            "dapi0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "SK0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=AbCdEf1234567890AbCdEf1234567890AbCdEf1234567890==;EndpointSuffix=core.windows.net",
            "AbCdEf1234567890AbCdEf1234567890AbCdEf1234567890",
        ),
        (
            "MTA4NjM5MzY1NzQ4NjY2MzY5Ng.GAbCdE.AbCdEf1234567890AbCdEf1234567890AbC",
            "AbCdEf1234567890AbCdEf1234567890AbC",
        ),
        (
            "MAILGUN_API_KEY=key-0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "https://deploy:Sup3rS3cretPassw0rd@example.com/repo.git",
            "Sup3rS3cretPassw0rd",
        ),
        (
            "ftp://anonymous:Sup3rS3cretPassw0rd@ftp.example.com/pub",
            "Sup3rS3cretPassw0rd",
        ),
        (
            "Cookie: session=AbCdEf1234567890AbCdEf1234567890; lang=en",
            "AbCdEf1234567890AbCdEf1234567890",
        ),
        (
            "curl -H 'PRIVATE-TOKEN: glpat-AbCdEf1234567890AbCd' https://gitlab.example.com",
            "AbCdEf1234567890AbCd",
        ),
        (
            "PRIVATE-TOKEN: AbCdEf1234567890AbCd",
            "AbCdEf1234567890AbCd",
        ),
        (
            "client_secret: 8Q~AbCdEf1234567890AbCdEf1234567890AbC",
            "AbCdEf1234567890AbCdEf1234567890AbC",
        ),
        (
            "abc8Q~AbCdEf1234567890AbCdEf1234567890AbC",
            "AbCdEf1234567890AbCdEf1234567890AbC",
        ),
        (
            "AbCdEf12345678.atlasv1.AbCdEf1234567890AbCdEf1234567890AbCdEf1234567890AbCdEf1234567890",
            "AbCdEf1234567890AbCdEf1234567890AbCdEf1234567890",
        ),
        (
            "[default]\naws_access_key_id = AKIAABCDEFGHIJKLMNOP\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY1",
            "wJalrXUtnFEMI",
        ),
        (
            "aws_session_token: \"IQoJb3JpZ2luX2VjEJr0123456789abcdefghij\"",
            "IQoJb3JpZ2luX2VjEJr0123456789abcdefghij",
        ),
        (
            "{\"aws_secret_access_key\": \"wJalrXUtnFEMI0K7MDENG0bPxRfiCYEXAMPLEKEY\"}",
            "wJalrXUtnFEMI0K7MDENG0bPxRfiCYEXAMPLEKEY",
        ),
        (
            "export AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEJr0123456789abcdefghij",
            "IQoJb3JpZ2luX2VjEJr0123456789abcdefghij",
        ),
        (
            crate::redact::keys::tests::PPK,
            "Q2hhbmdlTWVQbGVhc2VUaGlzSXNBVGVzdEtleQ1x",
        ),
        (
            crate::redact::keys::tests::PPK,
            "6c1a9e0f2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d",
        ),
    ];
    for (text, secret) in samples {
        let out = redactor.redact(text, RedactMode::Code);
        assert!(
            leak(&out, secret).is_none(),
            "{text:?} shows {:?}: {out}",
            leak(&out, secret)
        );
    }
}

#[test]
fn b30_no_over_masking_corpus() {
    let redactor = Redactor::builtin();
    let corpus = [
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 (HEAD -> main)",
        "Merge: 1a2b3c4 5d6e7f8",
        "request 123e4567-e89b-12d3-a456-426614174000 took 12ms",
        "image sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae pulled",
        "integrity sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "/usr/local/lib/python3.12/site-packages/some_package/submodule/deeply/nested/module_name.py",
        "arn:aws:iam::123456789012:role/service-role/MyLambdaExecutionRole-abcdef",
        "arn:aws:s3:::my-bucket-name/path/to/object.txt",
        "The quick brown fox jumps over the lazy dog; the configuration was saved.",
        "linear_model = LinearRegression()",
        "client_secret = os.environ[\"CLIENT_SECRET\"]",
        "client_secret: Optional[str] = None",
        "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        "Set the cookie: it expires tomorrow",
        "twitter_handle = exampleaccountname",
        "Downloaded https://example.com/files/archive.tar.gz (12 MB)",
        "ssh://git@github.com/org/repo.git",
        "  File \"/home/user/app.py\", line 42, in <module>",
        "key-value store ready",
        "version 1.2.3-rc.4+build.5678 released",
        "MAX_TOKENS=4096",
        "TOKEN_LIMIT=100 PASSWORD_MIN_LENGTH=8 SECRET_NAME=db-creds",
        "KEY=value",
        "password = request.form[\"password\"]",
        "def login(user, password=None, token=DEFAULT_TOKEN):",
        "token: Token",
        "password: str",
        "PWD=/srv/app/releases/current",
        "GITHUB_TOKEN=$GITHUB_TOKEN",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "Enter password:",
        "the pattern matched the path patch/patterns/pathological.txt",
        "| 1234567890123456 | 2026-12-04 | passed |",
        "secretName: db-credentials",
        "tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURCVENDQWUyZ0F3SUJBZ0lVYWJjZGVm",
        "auth: true",
        "auth=basic",
        "author: Jane Doe <jane@example.com>",
        "pass: 12 fail: 0 skip: 1",
        "+ make -j4 KEY=value",
        "--- a/src/auth.rs\n+++ b/src/auth.rs\n+    let token = next_token(&mut lexer);",
    ];
    for text in corpus {
        let out = redactor.redact(text, RedactMode::Code);
        assert_eq!(out, text, "over-masked");
    }
}

/// Regenerate with `HERD_WRITE_SECRETS_DOC=1 cargo test -p herd-hooks --lib b30_docs`.
#[test]
fn b30_docs_secrets_table_is_generated_from_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/secrets.md");
    let table = markdown_table(BUILTIN_ROWS);
    assert_eq!(table, crate::recognised_table());
    let begin = "<!-- BEGIN GENERATED TABLE -->\n";
    let end = "<!-- END GENERATED TABLE -->";
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    if std::env::var_os("HERD_WRITE_SECRETS_DOC").is_some() {
        let (head, tail) = match (doc.find(begin), doc.find(end)) {
            (Some(b), Some(e)) => (doc[..b].to_owned(), doc[e + end.len()..].to_owned()),
            _ => (doc.clone(), "\n".to_owned()),
        };
        let fresh = format!("{head}{begin}{table}{end}{tail}");
        std::fs::write(path, fresh).expect("docs/secrets.md is writable");
        return;
    }
    assert!(
        doc.contains(&format!("{begin}{table}{end}")),
        "docs/secrets.md does not hold the table the code makes; regenerate it with HERD_WRITE_SECRETS_DOC=1 cargo test -p herd-hooks --lib b30_docs"
    );
}

/// Regenerate with `HERD_WRITE_SECRETS_DOC=1 cargo test -p herd-hooks --lib b30_docs`.
#[test]
fn b30_docs_secrets_comparison_is_generated_from_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/secrets.md");
    let section = comparison_markdown();
    let begin = "<!-- BEGIN GENERATED COMPARISON -->\n";
    let end = "<!-- END GENERATED COMPARISON -->";
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    if std::env::var_os("HERD_WRITE_SECRETS_DOC").is_some() {
        let (head, tail) = match (doc.find(begin), doc.find(end)) {
            (Some(b), Some(e)) => (doc[..b].to_owned(), doc[e + end.len()..].to_owned()),
            _ => (
                format!("{doc}\n## Compared with other scanners\n\n"),
                "\n".to_owned(),
            ),
        };
        let fresh = format!("{head}{begin}{section}{end}{tail}");
        std::fs::write(path, fresh).expect("docs/secrets.md is writable");
        return;
    }
    assert!(
        doc.contains(&format!("{begin}{section}{end}")),
        "docs/secrets.md does not hold the comparison the code makes; regenerate it with HERD_WRITE_SECRETS_DOC=1 cargo test -p herd-hooks --lib b30_docs"
    );
}

#[test]
fn b30_a_kubectl_secret_read_is_a_secret_dump_and_other_kubectl_output_is_not() {
    for command in [
        "kubectl get secret db -o yaml",
        "kubectl -n prod get secrets -o json",
        "oc describe secret/db",
    ] {
        assert_eq!(
            RedactMode::for_command(command),
            RedactMode::SecretDump,
            "{command}"
        );
    }
    for command in [
        "kubectl get pods",
        "kubectl logs secret-rotator",
        "kubectl apply -f secret.yaml",
    ] {
        assert_eq!(
            RedactMode::for_command(command),
            RedactMode::Code,
            "{command}"
        );
    }
    let yaml = "apiVersion: v1\ndata:\n  password: czNjcjN0cGFzc3cwcmQxMjM0NTY=\n  api-token: Z2hwX2FiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6\nkind: Secret\n";
    let out = Redactor::builtin().redact_output("kubectl get secret db -o yaml", yaml);
    for secret in ["czNjcjN0cGFzc3cwcmQx", "Z2hwX2FiY2RlZmdoaWpr"] {
        assert!(leak(&out, secret).is_none(), "{out}");
    }
    assert!(out.contains("kind: Secret"), "{out}");
}
