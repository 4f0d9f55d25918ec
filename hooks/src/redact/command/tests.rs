//! Command lines redacted as command lines: one case per form, and ordinary
//! command lines left alone.

use crate::Redactor;

fn shown(command: &str) -> String {
    Redactor::builtin().redact_command(command).into_owned()
}

#[test]
fn b30_each_command_line_form_is_masked_and_the_rest_kept() {
    let cases = [
        (
            "API_TOKEN=s3cr3tvalue42 deploy.sh",
            "API_TOKEN=*** deploy.sh",
            "s3cr3tvalue42",
        ),
        (
            "env PGPASSWORD='hunter2!x' psql -h db",
            "env PGPASSWORD=*** psql -h db",
            "hunter2!x",
        ),
        (
            "FOO=AbCdEf1234567890AbCd make",
            "FOO=AbCdEf...AbCd make",
            "1234567890",
        ),
        (
            "mysql -u root -pS3cretPass db",
            "mysql -u root -p*** db",
            "S3cretPass",
        ),
        (
            "mysqldump --password=S3cretPass db",
            "mysqldump --password=*** db",
            "S3cretPass",
        ),
        (
            "app --password S3cretPass --verbose",
            "app --password *** --verbose",
            "S3cretPass",
        ),
        (
            "curl -u admin:S3cretPass https://x.example",
            "curl -u admin:*** https://x.example",
            "S3cretPass",
        ),
        (
            "curl --user=admin:S3cretPass https://x.example",
            "curl --user=admin:*** https://x.example",
            "S3cretPass",
        ),
        (
            "sshpass -p 'S3cretPass' ssh host",
            "sshpass -p *** ssh host",
            "S3cretPass",
        ),
        (
            "docker login -u me -p S3cretPass",
            "docker login -u me -p *** ",
            "S3cretPass",
        ),
        (
            "gh auth login --token AbCdEf1234567890",
            "gh auth login --token *** ",
            "1234567890",
        ),
        (
            "git clone https://me:S3cretPass@github.com/o/r.git",
            "git clone https://me:***@github.com/o/r.git",
            "S3cretPass",
        ),
        ("a && TOKEN=abc123xyz b", "a && TOKEN=*** b", "abc123xyz"),
        (
            "sshpass -pS3cretPass ssh host",
            "sshpass -p*** ssh host",
            "S3cretPass",
        ),
        (
            "redis-cli -h db -a S3cretPass ping",
            "redis-cli -h db -a *** ping",
            "S3cretPass",
        ),
        (
            "openssl enc -d -pass pass:S3cretPass -in x",
            "openssl enc -d -pass pass:*** -in x",
            "S3cretPass",
        ),
        (
            "vault login AbCdEf1234567890",
            "vault login *** ",
            "1234567890",
        ),
        (
            "npm config set //registry.npmjs.org/:_authToken AbCdEf1234567890",
            "npm config set //registry.npmjs.org/:_authToken *** ",
            "1234567890",
        ),
        (
            "htpasswd -bc .htpasswd admin S3cretPass",
            "htpasswd -bc .htpasswd admin *** ",
            "S3cretPass",
        ),
        (
            "htpasswd -nb admin S3cretPass",
            "htpasswd -nb admin *** ",
            "S3cretPass",
        ),
        (
            "bash -c 'MYSQL_PWD=S3cretPass mysql -u root'",
            "bash -c 'MYSQL_PWD=*** mysql -u root'",
            "S3cretPass",
        ),
        (
            "sh -c \"export API_TOKEN=S3cretPass; ./run\"",
            "sh -c \"export API_TOKEN=***; ./run\"",
            "S3cretPass",
        ),
        (
            "mysql --password S3cretPass -u root",
            "mysql --password *** -u root",
            "S3cretPass",
        ),
        (
            "curl --user admin:S3cretPass https://x.example",
            "curl --user admin:*** https://x.example",
            "S3cretPass",
        ),
    ];
    for (command, want, secret) in cases {
        let out = shown(command);
        assert!(!out.contains(secret), "{command:?} shows {secret}: {out}");
        assert_eq!(out.trim_end(), want.trim_end(), "{command:?}");
    }
}

#[test]
fn b30_the_secret_options_of_many_tools_are_masked() {
    let pass = "Pw7rT9xQ2mZ4vK8";
    for command in [
        format!("mysql -uroot -p{pass} app"),
        format!("mysql --password={pass} app"),
        format!("PGPASSWORD={pass} psql -h db"),
        format!("MYSQL_PWD={pass} mysql -u root"),
        format!("psql postgresql://app:{pass}@db/app"),
        format!("curl -u admin:{pass} https://x.example"),
        format!("curl -H 'Authorization: Bearer {pass}' https://x.example"),
        format!("curl --oauth2-bearer {pass} https://x.example"),
        format!("wget --password={pass} https://x.example/f"),
        format!("wget --http-password {pass} https://x.example/f"),
        format!("git clone https://me:{pass}@github.com/o/r.git"),
        format!("docker login -u me -p {pass} registry.example.com"),
        format!("docker login --password {pass}"),
        format!("podman login -p {pass} quay.io"),
        format!("az login --service-principal -u app -p {pass} --tenant t"),
        format!("aws configure set aws_secret_access_key {pass}"),
        format!("kubectl create secret generic db --from-literal=password={pass}"),
        format!("kubectl create secret generic db --from-literal=dsn={pass}"),
        format!("helm upgrade app ./chart --set password={pass}"),
        format!("helm upgrade app ./chart --set image.tag=1,db.password={pass},replicas=2"),
        format!("terraform apply -var 'db_password={pass}'"),
        format!("ansible-playbook site.yml -e 'ansible_password={pass}'"),
        format!("ansible-playbook site.yml -e ansible_become_pass={pass}"),
        format!("java -Dpassword={pass} -jar app.jar"),
        format!("java -Djavax.net.ssl.keyStorePassword={pass} -jar app.jar"),
        format!("keytool -list -keystore ks.jks -storepass {pass}"),
        format!("mongosh -u admin -p {pass} --authenticationDatabase admin"),
        format!("mongodump --password={pass} --out dump"),
        format!("sqlcmd -S db -U sa -P {pass} -Q 'select 1'"),
        format!("ldapsearch -x -D cn=admin -w {pass} -b dc=example"),
        format!("smbclient //host/share -U admin%{pass}"),
        format!("smbclient //host/share -Uadmin%{pass}"),
        format!("lftp -u admin,{pass} ftp.example.com"),
        format!("openssl pkcs12 -in c.p12 -passin pass:{pass}"),
        format!("plink -pw {pass} host"),
        format!("gh secret set DB --body {pass}"),
        format!("vault write auth/userpass/users/me password={pass}"),
        format!("docker run -e DB_PASSWORD={pass} postgres"),
        format!("app --client-secret {pass} --verbose"),
        format!("app --api-key={pass}"),
        format!("redis-cli --pass {pass} ping"),
    ] {
        let out = shown(&command);
        assert!(
            !out.contains(&pass[..10]),
            "{command:?} shows the password: {out}"
        );
        assert!(
            out.len() + 8 >= command.len() - pass.len(),
            "{command:?} lost more than the password: {out}"
        );
    }
}

#[test]
fn b30_ordinary_command_lines_are_left_alone() {
    for command in [
        "ls -la /tmp",
        "ssh -p 2222 host",
        "docker run -p 8080:80 nginx",
        "PATH=/usr/bin:/bin make -j4",
        "RUST_LOG=debug cargo test -- --nocapture",
        "curl -u admin https://x.example",
        "mysql -u root -p db",
        "echo $TOKEN",
        "TOKEN=$TOKEN deploy",
        "grep -r password src/",
        "sshpass -f passfile ssh host",
        "openssl enc -pass env:PASS -in x",
        "openssl enc -pass file:pass.txt -in x",
        "bash -c 'make -j4 && ./run'",
        "htpasswd -c .htpasswd admin",
        "vault login -method=github",
        "docker login --password-stdin -u me",
        "ansible-playbook --ask-pass site.yml",
        "ansible-playbook --ask-become-pass site.yml",
        "gh auth login --with-token < token.txt",
        "app --token-file ~/.token --max-tokens 4096",
        "app --no-password --verbose",
        "kubectl get secret db -o yaml",
        "helm upgrade app ./chart --set image.tag=1.2.3,replicas=2",
        "make KEY=value CACHE_KEY=user42",
        "mongosh -u admin -p --authenticationDatabase admin",
        "git config --global user.name me",
    ] {
        assert_eq!(shown(command), command);
    }
}
