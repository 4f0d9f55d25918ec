//! B30 end to end, an outsider's re-audit: the values of secret-named fields
//! (`PGPASSWORD`, `MYSQL_PWD`, `GITHUB_TOKEN`, `aws_secret_access_key`,
//! `AZURE_CLIENT_SECRET`, `password`, `client_secret`, a JDBC URL's and an ADO.NET
//! connection string's password, a URL query's `access_token`) printed in many
//! ways (`printenv`, `env -0`, `export -p`'s `declare -x`, `set`, ini, JSON once and
//! twice, YAML, a Python dict and repr, `cat -A`, `grep -rn`, `diff` and `diff -u`,
//! colours, overstrike, a `\r` progress frame, an OSC 8 link, a `set -x` trace, a
//! `docker inspect` env array, an XML config's elements and key and value pairs, a
//! flag and its next word) through every CLI
//! route, the MCP `process` tools and the durable ones; ordinary lines beside them
//! shown as printed; and many tools' secret options on command lines.

use serde_json::json;

use super::{
    Mode, Proof, Rng, Secret, bold, call, connect, data, process_actions, read_durable,
    read_finished, read_pages, script, secret, start,
};
use crate::support::Env;

/// Lines printed beside the secrets that must come out exactly as printed.
const ORDINARY: &[&str] = &[
    "MAX_TOKENS=4096",
    "TOKEN_LIMIT=100",
    "KEY=value",
    "password = request.form[\"password\"]",
    "token: Token",
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "request 123e4567-e89b-12d3-a456-426614174000 done",
    "arn:aws:iam::123456789012:role/service-role/MyRole",
    "GITHUB_TOKEN=$GITHUB_TOKEN",
    "PWD=/srv/app/releases/current",
    "    <add key=\"EnableFeatureX\" value=\"true\" />",
    "    <add key=\"ApiToken\" value=\"${API_TOKEN}\" />",
    "List<Token> tokens = new ArrayList<>();",
    "docker login --password-stdin registry.example.com",
];

/// The job's script and its secrets.
fn named_values(env: &Env, rng: &mut Rng) -> (String, Vec<Secret>) {
    let dir = env.scratch().join("conf");
    std::fs::create_dir_all(&dir).expect("the scratch dir is writable");
    let v = |rng: &mut Rng, head: &str| format!("{head}{}", rng.alnum(24));
    let pg = v(rng, "Pg");
    let mysql = v(rng, "My");
    let gh = v(rng, "Gh");
    let azure = v(rng, "Az");
    let aws = v(rng, "Aw");
    let json_pw = v(rng, "Js");
    let client = v(rng, "Cs");
    let py = v(rng, "Py");
    let jdbc = v(rng, "Jd");
    let ado = v(rng, "Ad");
    let query = v(rng, "Qy");
    let trace = v(rng, "Tr");
    let docker = v(rng, "Dk");
    let xml_key = v(rng, "Xk");
    let xml_pw = v(rng, "Xp");
    let flag = v(rng, "Fl");
    let admin = v(rng, "Ap");
    let android = v(rng, "An");
    let vault = v(rng, "Vt");
    let args = v(rng, "Ar");
    let vars = format!(
        "export PGPASSWORD='{pg}' MYSQL_PWD='{mysql}' GITHUB_TOKEN='{gh}' AZURE_CLIENT_SECRET='{azure}' DOCKER_PASSWORD='{docker}' TRACE_PW='{trace}'\n"
    );
    let vars = data(env, "vars.sh", &vars);
    std::fs::write(
        dir.join(".env"),
        format!("PGPASSWORD={pg}\nMYSQL_PWD={mysql}\nexport GITHUB_TOKEN={gh}\n"),
    )
    .expect("the scratch dir is writable");
    let ini = data(
        env,
        "credentials",
        &format!(
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {aws}\n"
        ),
    );
    let config = json!({"db": {"user": "app", "password": json_pw}, "client_secret": client});
    let once = serde_json::to_string_pretty(&config).unwrap_or_default();
    let twice = json!({"config": config.to_string()}).to_string();
    let json_file = data(env, "config.json", &format!("{once}\n{twice}\n"));
    let yaml = data(
        env,
        "settings.yaml",
        &format!(
            "db:\n  user: app\n  password: {json_pw}\noauth:\n  client_secret: \"{client}\"\n"
        ),
    );
    let repr = data(
        env,
        "repr.txt",
        &format!(
            "{{'user': 'app', 'password': '{py}'}}\nSettings(db_password='{py}', host='db')\n"
        ),
    );
    let conn = data(
        env,
        "conn.txt",
        &format!(
            "jdbc:postgresql://db:5432/app?user=app&password={jdbc}&ssl=true\nServer=db;Database=app;User Id=sa;Password={ado};\nGET https://api.example.com/v1/items?access_token={query}&page=2\n"
        ),
    );
    let inspect = data(
        env,
        "inspect.json",
        &format!(
            "{}\n",
            json!([{"Config": {"Env": ["PATH=/usr/bin", format!("POSTGRES_PASSWORD={pg}")]}}])
        ),
    );
    let overstrike = data(
        env,
        "overstrike.txt",
        &format!("{}\n", bold(&format!("MYSQL_PWD={mysql}"))),
    );
    let web_config = data(
        env,
        "web.config",
        &format!(
            "<configuration>\n  <appSettings>\n    <add key=\"StorageAccountKey\" value=\"{xml_key}\" />\n  </appSettings>\n  <smtp>\n    <password>{xml_pw}</password>\n  </smtp>\n  <string name=\"api_key\">{android}</string>\n</configuration>\n"
        ),
    );
    let ordinary = data(env, "ordinary.txt", &format!("{}\n", ORDINARY.join("\n")));
    let command = script(
        env,
        "named-values",
        &format!(
            r#"cd '{scratch}'
. {vars}
echo start
printenv | grep -E '^(PGPASSWORD|MYSQL_PWD|GITHUB_TOKEN|AZURE_CLIENT_SECRET)='
env -0 | grep -z -E '^(PGPASSWORD|DOCKER_PASSWORD)='; echo
export -p | grep -E 'PGPASSWORD|GITHUB_TOKEN'
set | grep -E '^(AZURE_CLIENT_SECRET|MYSQL_PWD)='
cat {ini}
cat {json_file}
cat {yaml}
cat {repr}
cat {conn}
cat -A conf/.env
grep -rn . conf
diff /dev/null conf/.env
diff -u /dev/null conf/.env
printf '\033[31mGITHUB_TOKEN=%s\033[0m\n' "$GITHUB_TOKEN"
printf 'PGPASSWORD=\033[1m%s\033[0m\n' "$PGPASSWORD"
printf 'progress 10%%\rDOCKER_PASSWORD=%s\n' "$DOCKER_PASSWORD"
printf '\033]8;;https://example.com/\033\\MYSQL_PWD=%s\033]8;;\033\\\n' "$MYSQL_PWD"
cat {overstrike}
cat {inspect}
set -x
: mysql --password="$TRACE_PW" app
set +x
echo "running: docker login -u bob --password {flag} registry.example.com"
echo '{{"argv": "az vm create -n vm --admin-password \"{admin}\""}}'
echo "vault login --vault-token {vault} -address=https://vault.example.com"
echo '{{"containers": [{{"args": ["--db-password", "{args}", "--port", "5432"]}}]}}'
cat {web_config}
cat {ordinary}
echo done
"#,
            scratch = env.scratch().display(),
        ),
    );
    let secrets = [
        ("PGPASSWORD", &pg),
        ("MYSQL_PWD", &mysql),
        ("GITHUB_TOKEN", &gh),
        ("AZURE_CLIENT_SECRET", &azure),
        ("aws_secret_access_key", &aws),
        ("JSON and YAML password", &json_pw),
        ("client_secret", &client),
        ("Python dict and repr password", &py),
        ("JDBC password", &jdbc),
        ("ADO.NET password", &ado),
        ("URL query access_token", &query),
        ("password in a set -x trace", &trace),
        ("DOCKER_PASSWORD", &docker),
        ("an XML key and value pair", &xml_key),
        ("an XML password element", &xml_pw),
        ("a --password flag and its next word", &flag),
        ("an --admin-password flag in a JSON string", &admin),
        ("an XML element named by its attribute", &android),
        ("a compound --vault-token flag", &vault),
        ("a flag and its value in an argument list", &args),
    ]
    .iter()
    .map(|(name, value)| secret(name, value))
    .collect();
    (command, secrets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_secret_named_values_printed_every_way_are_masked_on_every_route() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0050);
    let (command, secrets) = named_values(&env, &mut rng);
    let mut proof = Proof::new(secrets);
    let mut ids = Vec::new();
    for mode in Mode::BOTH {
        let label = format!("secret-named values, {}", mode.name());
        let id = start(&env, mode, &["--notify"], &command);
        tokio::task::block_in_place(|| {
            read_finished(&env, &id, &label, &mut proof);
            read_pages(
                &env,
                &id,
                &label,
                &[(0, 5), (10, 7), (30, 20)],
                None,
                &mut proof,
            );
            for n in ["1", "25"] {
                proof.text(
                    &format!("{label}: logs -n {n}"),
                    &env.ok(&["logs", &id, "-n", n]),
                );
            }
            let shown = env.ok(&["logs", &id]);
            for line in ORDINARY {
                assert!(
                    shown.lines().any(|l| l.trim_end_matches('\r') == *line),
                    "{label}: the ordinary line {line:?} is not shown as printed: {shown}"
                );
            }
        });
        ids.push((id, label));
    }
    let client = connect(&env).await;
    for (id, label) in &ids {
        process_actions(
            &client,
            &mut proof,
            label,
            id,
            &[
                ("poll", json!({})),
                ("wait", json!({"timeout": 20})),
                ("log", json!({})),
                ("log", json!({"limit": 5})),
                ("log", json!({"offset": 8, "limit": 30})),
            ],
        )
        .await;
    }
    call(
        &client,
        &mut proof,
        "process list",
        "process",
        json!({"action": "list"}),
    )
    .await;
    client.cancel().await.expect("the client closes");
    tokio::task::block_in_place(|| read_durable(&env, &ids, &mut proof));
    proof.finish("secret-named values", 60);
}

#[test]
fn b30_tool_secret_options_on_command_lines_are_shown_redacted_and_run_as_written() {
    let env = Env::new();
    let mut rng = Rng(0x5eed_0051);
    let pass = format!("Pw{}", rng.alnum(18));
    let quiet = ">/dev/null 2>&1";
    let commands = [
        format!("PGPASSWORD={pass} bash -c 'echo length ${{#PGPASSWORD}}'"),
        format!(
            "psql postgresql://app:{pass}@127.0.0.1:9/app -c 'select 1' {quiet}; echo psql done"
        ),
        format!(
            "curl -s -H 'Authorization: Bearer {pass}' --oauth2-bearer {pass} http://127.0.0.1:9 {quiet}; echo curl done"
        ),
        format!("wget --http-password={pass} http://127.0.0.1:9/f {quiet}; echo wget done"),
        format!(
            "java -Dpassword={pass} -Djavax.net.ssl.keyStorePassword={pass} -version {quiet}; echo java done"
        ),
        format!(
            "kubectl create secret generic db --from-literal=password={pass} --dry-run=client {quiet}; echo kubectl done"
        ),
        format!(
            "helm upgrade app ./chart --set image.tag=1,db.password={pass} {quiet}; echo helm done"
        ),
        format!("terraform plan -var 'db_password={pass}' {quiet}; echo terraform done"),
        format!(
            "ansible-playbook site.yml -e 'ansible_password={pass}' {quiet}; echo ansible done"
        ),
        format!("mongosh -u admin -p {pass} {quiet}; echo mongosh done"),
        format!("sqlcmd -S db -U sa -P {pass} {quiet}; echo sqlcmd done"),
        format!("ldapsearch -x -w {pass} {quiet}; echo ldap done"),
        format!("smbclient //h/s -U admin%{pass} {quiet}; echo smb done"),
        format!("lftp -u admin,{pass} 127.0.0.1 -e quit {quiet}; echo lftp done"),
        format!(
            "aws configure set aws_secret_access_key {pass} --profile none {quiet}; echo aws done"
        ),
        format!("docker login -u me -p {pass} 127.0.0.1:9 {quiet}; echo docker done"),
    ];
    let mut proof = Proof::new(vec![secret("password on a command line", &pass)]);
    let mut ids = Vec::new();
    for (n, command) in commands.iter().enumerate() {
        let label = format!("tool option {n}");
        let answer = env.json(&["run", "--json", "--notify", "--", command]);
        proof.json(&format!("{label}: run --json"), &answer);
        let id = answer["session_id"]
            .as_str()
            .expect("run --json names the session")
            .to_owned();
        read_finished(&env, &id, &label, &mut proof);
        ids.push((id, label));
    }
    // The command ran as written: the job saw the whole password.
    let ran = env.ok(&["logs", &ids[0].0]);
    assert!(
        ran.contains(&format!("length {}", pass.len())),
        "the job did not see its password: {ran}"
    );
    read_durable(&env, &ids, &mut proof);
    proof.finish("tool secret options on command lines", 100);
}
