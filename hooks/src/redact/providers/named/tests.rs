//! Secret-named values: every syntax that prints one is masked in ordinary output,
//! and code, references, paths, placeholders and prose are left alone.

use crate::{RedactMode, Redactor};

fn code(text: &str) -> String {
    Redactor::builtin()
        .redact(text, RedactMode::Code)
        .into_owned()
}

#[test]
fn b30_secret_named_values_are_masked_in_every_syntax() {
    let s = "Zq8vLr2WmN4tHx6Pk";
    let cases = [
        format!("PGPASSWORD={s}"),
        format!("MYSQL_PWD={s}"),
        format!("export PGPASSWORD={s}"),
        format!("declare -x MYSQL_PWD=\"{s}\""),
        format!("PGPASSWORD='{s}'"),
        format!("aws_secret_access_key = {s}"),
        format!("aws_session_token={s}"),
        format!("AZURE_CLIENT_SECRET={s}"),
        format!("ARM_CLIENT_SECRET: {s}"),
        format!("GITHUB_TOKEN={s}"),
        format!("GH_TOKEN={s}"),
        format!("NPM_TOKEN={s}"),
        format!("VAULT_TOKEN={s}"),
        format!("CONSUL_HTTP_TOKEN={s}"),
        format!("DOCKER_PASSWORD={s}"),
        format!("TWINE_PASSWORD={s}"),
        format!("HEROKU_API_KEY={s}"),
        format!("OPENAI_API_KEY={s}"),
        format!("ANTHROPIC_API_KEY={s}"),
        format!("CLOUDFLARE_API_TOKEN={s}"),
        format!("DIGITALOCEAN_ACCESS_TOKEN={s}"),
        format!("SLACK_BOT_TOKEN={s}"),
        format!("RSYNC_PASSWORD={s}"),
        format!("DJANGO_SECRET_KEY={s}"),
        format!("{{\"password\": \"{s}\"}}"),
        format!("{{\"client_secret\":\"{s}\"}}"),
        format!("{{\\\"password\\\": \\\"{s}\\\"}}"),
        format!("{{\\\\\\\"password\\\\\\\": \\\\\\\"{s}\\\\\\\"}}"),
        format!("{{'password': '{s}', 'host': 'db'}}"),
        format!("Settings(db_password='{s}', host='db')"),
        format!("User{{name=bob, password={s}}}"),
        format!("password: {s}"),
        format!("  private_key: \"{s}\""),
        format!("secret: '{s}'"),
        format!("password = \"{s}\""),
        format!("level=info user=bob password={s} msg=ok"),
        format!("[\"PATH=/usr/bin\", \"DB_PASSWORD={s}\"]"),
        format!("\"Env\": [\"POSTGRES_PASSWORD={s}\"]"),
        format!("jdbc:mysql://db:3306/app?user=app&password={s}&ssl=true"),
        format!("jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={s};"),
        format!("Server=db;Database=app;User Id=sa;Password={s};"),
        format!("Data Source=db;Initial Catalog=app;User ID=sa;Pwd={s}"),
        format!("DRIVER={{PostgreSQL}};SERVER=db;UID=app;PWD={s};"),
        format!("https://api.example.com/v1?access_token={s}&page=2"),
        format!("https://api.example.com/v1?api_key={s}"),
        format!("https://login.example.com/token?client_id=app&client_secret={s}"),
        format!("https://x.blob.core.windows.net/c/b?sv=2022-11-02&sig={s}%3D"),
        format!("java -Dpassword={s} -jar app.jar"),
        format!("-Djavax.net.ssl.keyStorePassword={s}"),
        format!("+ mysql --password={s} app"),
        format!("ansible_password={s}"),
        format!("ansible_become_pass={s}"),
        format!("db.password={s}"),
        format!("spring.datasource.password: {s}"),
        format!("X-Amz-Security-Token={s}"),
        "PASSWORD=correcthorsebattery".to_owned(),
        format!("password => '{s}'"),
        format!("$password := \"{s}\""),
        format!("A=1\u{0}MYSQL_PWD={s}\u{0}B=2"),
        format!("DB_PASSWORD={s}$"),
        format!("./app/.env:3:API_TOKEN={s}"),
        format!("+DB_PASSWORD={s}"),
        format!("_auth = {s}"),
        format!("//registry.npmjs.org/:_authToken={s}"),
        format!("secret: postgres://app:{s}@db/app"),
        format!("api_key = os.getenv(\"OPENAI_API_KEY\", \"sk-proj-{s}\")"),
        format!("token = Token(\"ghp_{s}abcdefghijklmnopqrs\")"),
    ];
    for text in &cases {
        let out = code(text);
        let secret = if text.contains("correcthorse") {
            "correcthorsebattery"
        } else {
            s
        };
        assert!(
            !out.contains(&secret[..10]),
            "{text:?} shows the secret: {out:?}"
        );
    }
}

#[test]
fn b30_code_references_and_prose_beside_secret_names_are_left_alone() {
    for text in [
        "password = request.form[\"password\"]",
        "password=password",
        "db.connect(host=h, password=pw)",
        "password=self.password",
        "password: str",
        "password: string;",
        "password: String,",
        "token: Token",
        "token: u64,",
        "secret: Vec<u8>",
        "password: Option<String>",
        "token = next_token",
        "token: EOF",
        "max_tokens=4096",
        "MAX_TOKENS=4096",
        "TOKEN_LIMIT=100",
        "PASSWORD_MIN_LENGTH=8",
        "SECRET_NAME=db-creds",
        "token=None",
        "password: null",
        "\"password\": \"\"",
        "\"password\": \"********\"",
        "\"token\": \"<token>\"",
        "password: ${DB_PASSWORD}",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "password: \"{{ vault_db_password }}\"",
        "GITHUB_TOKEN=$GITHUB_TOKEN",
        "api_key=os.environ['API_KEY']",
        "PWD=/home/user/project",
        "OLDPWD=/home/user",
        "credentials: ~/.aws/credentials",
        "PASSWORD_FILE=/run/secrets/db",
        "password_file: ./secret.txt",
        "Enter password:",
        "Password: ",
        "Invalid password: too short",
        "The token: it expires after an hour.",
        "secret: true",
        "bypass=1",
        "compass: north",
        "token_type=Bearer",
        "\"tokens\": 1234",
        "SECRET_KEY = settings.SECRET_KEY",
        "client_secret: SecretStr",
        "secretName: db-credentials",
        "signature: valid",
        "password: required",
        "token_url: https://auth.example.com/oauth/token",
        "access_token_url=https://auth.example.com/token",
        "--password-stdin",
        "pass: 12",
        "token: 3",
        "pwd: /srv/app",
        "if password == other:",
        "pass=12 fail=0",
    ] {
        assert_eq!(code(text), text, "over-masked");
    }
}

#[test]
fn b30_secret_names_nested_in_one_value_cost_one_search_each() {
    // Fuzz finding: every value left alone (`!…`, a path) was searched for inner
    // secrets, and inside that search every value nested in it again, so the work
    // doubled with each name nested in one value (18 names: 0.1 s; 30: minutes).
    // Counted, not timed: at most one search per name.
    for unit in ["password=!", "token=/x/"] {
        for n_names in [8, 25] {
            let text = format!("run {} done", unit.repeat(n_names));
            let before = super::n_inner_searches();
            assert_eq!(code(&text), text);
            let n_searches = super::n_inner_searches() - before;
            assert!(
                n_searches <= n_names,
                "{n_searches} inner searches for {n_names} names in {text:?}"
            );
        }
    }
    // What a nested value holds is still masked, in ordinary output and in a dump.
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let text = format!("run password=!token=/x/{token} done");
    for mode in [RedactMode::Code, RedactMode::SecretDump] {
        let out = Redactor::builtin().redact(&text, mode).into_owned();
        assert!(
            out.contains("password=!token=/x/ghp_ab") && !out.contains(token),
            "{mode:?}: {out}"
        );
    }
}

#[test]
fn b30_secrets_named_apart_from_their_values_are_masked() {
    // Name and value in separate places: an XML element or key and value
    // attributes, a flag and its next word.
    let s = "Zq8vLr2WmN4tHx6Pk";
    for text in [
        format!("<add key=\"StorageAccountKey\" value=\"{s}\"/>"),
        format!("<add key=\"ApiSecret\" value=\"{s}\" />"),
        format!("<add key=\"SmtpPassword\" value=\"{s}\"/>"),
        format!("<add key=\"ClearTextPassword\" value=\"{s}\" />"),
        format!("<setting name=\"ApiKey\" value='{s}'/>"),
        format!("<property name=\"db.password\" value=\"{s}\"/>"),
        format!("<property name=\"password\"   VALUE = \"{s}\"/>"),
        format!("<password>{s}</password>"),
        format!("  <Password> {s} </Password>"),
        format!("<db:clientSecret>{s}</db:clientSecret>"),
        format!("<entry key=\"password\">{s}</entry>"),
        format!("<string name=\"api_key\">{s}</string>"),
        format!("<td class=\"password\">{s}</td>"),
        format!("{{\"xml\": \"<password>{s}</password>\"}}"),
        format!("mysql --password {s} app"),
        format!("docker login -u bob --password {s} registry.example.com"),
        format!("az login --service-principal -u app --password \"{s}\" --tenant t"),
        format!("az vm create -n vm --admin-password {s}"),
        format!("az storage blob list --account-key {s}"),
        format!("az storage blob list --sas-token '{s}'"),
        format!("tool --docker-password {s}"),
        format!("aws configure --secret-key {s}"),
        format!("-token {s}"),
        format!("vault login -token {s}"),
        format!("tool --client-secret {s} --client-id app"),
        format!("tool --api-key '{s}'"),
        format!("{{\"cmd\": \"tool --password \\\"{s}\\\"\"}}"),
        // Any compound flag ending in a secret word.
        format!("tool --vault-token {s}"),
        format!("lftp --ftp-password {s}"),
        format!("svc --jwt-secret {s}"),
        format!("tool --aws-secret-access-key {s}"),
        format!("passwd-tool --new-password {s}"),
        format!("tool --db_pass {s}"),
        format!("tool --Storage-Account-Key \"{s}\""),
        format!("curl --oauth2-bearer-token={s}"),
        format!("http --auth bob:{s} example.com"),
        // A flag at a line's start, after markup or a pipe, after a spelled line
        // break; a dotted flag; a list with two spaces.
        format!("line one\n--password {s}"),
        format!("line one\r\n--db-password {s}"),
        format!("50%\r--password {s}"),
        format!("mysql -u root \\\n--password {s} db"),
        format!("<code>--password {s}</code>"),
        format!("tool|--password {s}"),
        format!("{{\"cmd\": \"mysql \\\\\\n--password {s}\"}}"),
        format!("{{\"cmd\": \"a\\n--password {s}\"}}"),
        format!("{{\"cmd\": \"a\\t--password {s}\"}}"),
        format!("redis_exporter --redis.password {s}"),
        format!("[\"--password\",  \"{s}\"]"),
        // Java's key stores.
        format!("keytool -list -keystore app.jks -storepass {s}"),
        format!("keytool -importkeystore -srcstorepass {s} -deststorepass {s}"),
        format!("keytool -genkey -keypass {s} -alias app"),
        format!("server.ssl.key-store-password={s}"),
        format!("keyStorePass: \"{s}\""),
        // Argument lists: JSON, a Python list, escaped inside a JSON string.
        format!("\"args\": [\"--password\", \"{s}\", \"--verbose\"]"),
        format!("['deploy', '--vault-token', '{s}']"),
        format!("[\"--client-secret\",\"{s}\"]"),
        format!("{{\"cmd\": \"[\\\"--password\\\", \\\"{s}\\\"]\"}}"),
    ] {
        let out = code(&text);
        assert!(
            !out.contains(&s[..10]),
            "{text:?} shows the secret: {out:?}"
        );
    }
}

#[test]
fn b30_what_sits_apart_from_a_secret_name_but_is_none_stays() {
    for text in [
        "<add key=\"EnableFeatureX\" value=\"true\"/>",
        "<add key=\"Token\" value=\"${MY_TOKEN}\"/>",
        "<add key=\"Password\" value=\"\"/>",
        "<add key=\"ApiKey\" value=\"changeme\"/>",
        "<password>${DB_PASS}</password>",
        "<password></password>",
        "<token>{{ token }}</token>",
        "<passwordPolicy>min 8</passwordPolicy>",
        "<password>Change your password</password>",
        "<label>Password</label>",
        "<th>token</th><td>count</td>",
        "<a href=\"/reset-password\">Forgot password?</a>",
        "<h2 id=\"password\">Change password</h2>",
        "<label htmlFor=\"password\">Password:</label>",
        "<label for=\"password\">Enter your password:</label>",
        "<testcase name=\"test_password\">assertion failed</testcase>",
        "<option value=\"password\">Password</option>",
        "<option value=\"token\">Token</option>",
        "<span class=\"token\">abc</span>",
        "<div class=\"secret\">Hidden</div>",
        "<span class=\"token keyword\">const</span>",
        "<input type=\"password\">Show password?</input>",
        "List<Token> tokens = new ArrayList<>();",
        "Map<String, Secret> secrets = x; // </a>",
        "fn f() -> Result<Token> { x </ y }",
        "docker login --password-stdin registry.example.com",
        "tool --token-file /run/secrets/token",
        "tool --password \"$DB_PASSWORD\"",
        "tool --password $DB_PASSWORD",
        "tool --token ${{ secrets.TOKEN }}",
        "tool --password --verbose",
        "tool --pass 3",
        "see --password below",
        "see --token docs",
        "single-pass 2x faster",
        "aws s3api get-object --bucket b --key path/to/file.txt out.txt",
        "gsutil cp --key path/to/obj.json x",
        "a two-pass MP3 encoder",
        "git log --grep top-secret release2024",
        "cat my-token notes2024.txt",
        "  --password\tIf set, prompt for the password",
        "tool --password  Hunter2x",
        "openssl enc -pass env:PASS -in x",
        "find /var/lib/mysql -name '*.ibd' -print",
        // Help text.
        "  -p, --password <PASSWORD>    The password",
        "      --password PASSWORD      The password",
        "      --password    If set, prompt for the password",
        "      --pass  Pass-through mode",
        "      --token TOKEN            An API token",
        "      --token string           API token",
        "      --client-secret SECRET   The client secret",
        "  mysql [OPTIONS] [database] -p, --password[=name] Password to use",
        "      --vault-token TOKEN      The Vault token",
        "      --jwt-secret <SECRET>    The signing secret",
        // A secret word and its next word outside a flag.
        "the token abc123def456 was rotated",
        "Password Hunter2x is too weak",
        "re-token ab12cd34ef56 later",
        "x--token ab12cd34ef56",
        "---token ab12cd34ef56",
        // Lists that are no argument list of a flag and its value.
        "[\"password\", \"token\", \"secret\"]",
        "[\"--password\", \"--token\"]",
        "[\"--password\", \"$DB_PASSWORD\"]",
        "[\"--password\", PASSWORD]",
        "fields = ['password', 'Hunter2x']",
        // Switches and actions whose next word is no value; tokens of a page or
        // a request; an address; list items that are names or descriptions.
        "createdb --no-password MyApp2024",
        "psql --no-password \"host=db1 dbname=app\"",
        "mysql --skip-password Prod_DB2",
        "ansible-playbook --ask-vault-pass deploy-prod.yml",
        "ansible-playbook --ask-become-pass playbooks/site.yml",
        "gh auth status --show-token ghx_host2",
        "aws s3api list-objects --starting-token Z3M3LMPEXAMPLE2",
        "aws ssm send-command --client-request-token 123Example456",
        "curl --mail-auth user@example.com smtp://mail.example.com",
        "program.option('--password', 'Password for the database')",
        "OPTIONS = [(\"--password\", \"Database password\")]",
        "@click.option('--password', 'db_password', prompt=True)",
        "SENSITIVE = ['--password', 'passwd', '--secret', 'secret']",
        "[\"-pass\", \"_pass\", \"pass\"]",
        "a bypass 12ab34cd56 route",
        "keytool -storepass:env STOREPASS",
        "keytool -storepass changeit",
    ] {
        assert_eq!(code(text), text, "over-masked");
    }
}

#[test]
fn b30_a_command_line_read_two_ways_shows_neither_readings_secret() {
    // The command line's reader masks `Hunter2,Zq8…` (the option's whole next
    // word), the flag family `Hunter2` (its value ends at the comma): what either
    // masks stays masked.
    let s = "Zq8vLr2WmN4tHx6Pk";
    let redactor = Redactor::builtin();
    for command in [
        format!("tool --password Hunter2,{s}"),
        format!("tool --password \"Hunter2\"{s}"),
    ] {
        let shown = redactor.redact_command(&command);
        for piece in [&s[..4], &s[s.len() - 4..], "Hunter2"] {
            assert!(!shown.contains(piece), "{command:?} shows {shown:?}");
        }
    }
}
