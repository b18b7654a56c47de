//! Configuration validation: good files parse into the expected values, and each
//! bad file is refused with a message that names the key and the reason.

use teammem::config::{Agent, Config, Database, Forge, PrivateKey};

const MINIMAL: &str = r#"
[server]
data_dir = "/var/lib/teammem"
"#;

const FULL: &str = r#"
[server]
listen = "127.0.0.1:9000"
data_dir = "/var/lib/teammem"
public_url = "https://teammem.example.org/"

[github]
api_url = "https://api.github.com"
git_url = "https://github.com"
app_id = 12345
private_key = { key_vault_secret_uri = "https://kv.vault.azure.net/secrets/github-app-key" }
bot_name = "teammem[bot]"
bot_email = "12345+teammem[bot]@users.noreply.github.com"

[[sources]]
repository = "octo/app"
dispatch_workflow = ".github/workflows/team-memory-post-merge.yml"
request_workflow  = ".github/workflows/team-memory-request.yml"
webhook_secret_env = "TEAMMEM_SECRET_OCTO_APP"
oidc_audience = "https://teammem.example.org"
policy_path = ".github/team-memory.md"
sweep = true

[[sources]]
repository = "demo/app"
local_path = "/srv/git/app.git"
local_wiki_path = "/srv/git/app.wiki.git"
webhook_secret_env = "TEAMMEM_SECRET_DEMO"
protected_pages = ["Home.md", "Areas/Team.md"]

[queue]
workers = 4
max_attempts = 5
lease_seconds = 30

[schedule]
sweep = "0 */15 * * * *"
rescue = "*/15 * * * * *"
retention = "0 0 3 * * *"

[agent]
kind = "builtin"
max_changed_bytes = 65536

[api]
allow_github_tokens = true
"#;

#[test]
fn minimal_config_gets_defaults() {
    let c = Config::parse(MINIMAL).unwrap();
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.queue.workers, 2);
    assert_eq!(c.queue.max_attempts, 8);
    assert_eq!(c.queue.lease.as_secs(), 60);
    assert!(matches!(c.agent, Agent::Builtin));
    assert!(c.github.is_none());
    assert!(c.sources.is_empty());
    assert!(!c.api.allow_github_tokens);
    assert_eq!(c.agent_limits.max_changed_bytes, 256 * 1024);
    assert_eq!(c.server.header_timeout.as_secs(), 10);
    assert_eq!(c.server.request_timeout.as_secs(), 60);
    assert_eq!(c.server.max_connections, 1024);
    assert!(
        c.dashboard.trust_loopback,
        "no public URL: loopback is trusted"
    );
}

#[test]
fn loopback_trust_follows_the_public_url_unless_set() {
    let with = |server: &str, dashboard: &str| {
        Config::parse(&format!(
            "[server]\ndata_dir = \"/d\"\n{server}\n{dashboard}"
        ))
        .unwrap()
        .dashboard
        .trust_loopback
    };
    assert!(!with("public_url = \"https://teammem.example.org\"", ""));
    assert!(with(
        "public_url = \"https://teammem.example.org\"",
        "[dashboard]\ntrust_loopback = true"
    ));
    assert!(with("public_url = \"http://127.0.0.1:8080/\"", ""));
    assert!(with("public_url = \"http://[::1]:8080\"", ""));
    assert!(with("public_url = \"http://localhost\"", ""));
    assert!(!with("public_url = \"https://localhost.example.org\"", ""));
    assert!(!with("", "[dashboard]\ntrust_loopback = false"));
}

#[test]
fn full_config_parses_every_section() {
    let c = Config::parse(FULL).unwrap();
    assert_eq!(
        c.server.public_url.as_deref(),
        Some("https://teammem.example.org")
    );
    let gh = c.github.as_ref().unwrap();
    assert_eq!(gh.app_id, 12345);
    assert_eq!(
        gh.private_key,
        PrivateKey::KeyVault {
            secret_uri: "https://kv.vault.azure.net/secrets/github-app-key".into()
        }
    );
    assert_eq!(c.bot.email, "12345+teammem[bot]@users.noreply.github.com");
    assert_eq!(c.sources.len(), 2);
    let octo = c.source("Octo/App").unwrap();
    assert_eq!(octo.wiki_repository, "octo/app");
    assert_eq!(octo.forge, Forge::GitHub);
    assert!(octo.sweep);
    assert_eq!(octo.destination(), "github:octo/app.wiki");
    assert_eq!(
        octo.protected_pages,
        ["Home.md", "_Sidebar.md", "_Footer.md"]
    );
    let demo = c.source("demo/app").unwrap();
    assert!(matches!(demo.forge, Forge::Local { .. }));
    assert_eq!(demo.protected_pages, ["Home.md", "Areas/Team.md"]);
    assert_eq!(c.agent_limits.max_changed_bytes, 65536);
    assert_eq!(c.queue.workers, 4);
    assert_eq!(c.queue.lease.as_secs(), 30);
    assert!(c.api.allow_github_tokens);
}

/// Each case: a config text and a fragment its error list must contain.
const BAD: &[(&str, &str, &str)] = &[
    ("missing server", "", "server: required table is missing"),
    (
        "missing data_dir",
        "[server]\nlisten = \"127.0.0.1:1\"",
        "server.data_dir: required key is missing",
    ),
    (
        "bad listen",
        "[server]\ndata_dir = \"/d\"\nlisten = \"localhost\"",
        "server.listen: expected an address like 127.0.0.1:8080, got \"localhost\"",
    ),
    (
        "unknown top key",
        "[server]\ndata_dir = \"/d\"\n[servr]\nx = 1",
        "servr: unknown key",
    ),
    (
        "unknown nested key",
        "[server]\ndata_dir = \"/d\"\nport = 80",
        "server.port: unknown key",
    ),
    ("not toml", "[server\n", "not valid TOML"),
    (
        "repository without owner",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\n[[sources]]\nrepository = \"octo\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"",
        "sources[1].repository: expected owner/name, got \"octo\"",
    ),
    (
        "duplicate source",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\n[[sources]]\nrepository = \"Octo/App\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"",
        "sources[1].repository: Octo/App is already configured by sources[0]",
    ),
    (
        "inline webhook secret",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret = \"hunter2\"\nwebhook_secret_env = \"S\"",
        "sources[0].webhook_secret: unknown key; secrets are never written in the config",
    ),
    (
        "secret value in an env-name key",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"my secret value\"",
        "sources[0].webhook_secret_env: expected the NAME of an environment variable",
    ),
    (
        "inline private key",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = \"-----BEGIN RSA PRIVATE KEY-----\"",
        "github.private_key: the key itself is never accepted in the config",
    ),
    (
        "pem pasted into a file key",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"-----BEGIN RSA PRIVATE KEY-----\" }",
        "github.private_key.file: looks like a secret",
    ),
    (
        "token pasted as public url",
        "[server]\ndata_dir = \"/d\"\npublic_url = \"ghp_abcdef\"",
        "server.public_url: looks like a secret",
    ),
    (
        "private key both ways",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"/k.pem\", key_vault_secret_uri = \"https://k.vault.azure.net/secrets/k\" }",
        "github.private_key: give either key_vault_secret_uri or file, not both",
    ),
    (
        "key vault uri not https",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { key_vault_secret_uri = \"http://k/secrets/x\" }",
        "github.private_key.key_vault_secret_uri: expected https://NAME.vault.azure.net/secrets/NAME",
    ),
    (
        "missing app id",
        "[server]\ndata_dir = \"/d\"\n[github]\nprivate_key = { file = \"/k.pem\" }",
        "github.app_id: required key is missing",
    ),
    (
        "github source without github section",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nwebhook_secret_env = \"S\"",
        "sources[0].repository: a GitHub source needs a [github] section",
    ),
    (
        "local path without wiki path",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nwebhook_secret_env = \"S\"",
        "sources[0].local_wiki_path: required with local_path",
    ),
    (
        "relative local path",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"",
        "sources[0].local_path: expected an absolute path, got \"a\"",
    ),
    (
        "bad workflow path",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\ndispatch_workflow = \"post-merge.yml\"",
        "sources[0].dispatch_workflow: expected a path like .github/workflows/NAME.yml",
    ),
    (
        "policy path escapes",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\npolicy_path = \"../../etc/passwd\"",
        "sources[0].policy_path: expected a path inside the repository",
    ),
    (
        "missing webhook secret env",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"",
        "sources[0].webhook_secret_env: required key is missing",
    ),
    (
        "workers zero",
        "[server]\ndata_dir = \"/d\"\n[queue]\nworkers = 0",
        "queue.workers: expected a number from 1 to 64, got 0",
    ),
    (
        "workers wrong type",
        "[server]\ndata_dir = \"/d\"\n[queue]\nworkers = \"two\"",
        "queue.workers: expected an integer, got string",
    ),
    (
        "bad cron",
        "[server]\ndata_dir = \"/d\"\n[schedule]\nrescue = \"every minute\"",
        "schedule.rescue: not a cron expression with seconds",
    ),
    (
        "unknown agent",
        "[server]\ndata_dir = \"/d\"\n[agent]\nkind = \"gpt\"",
        "agent.kind: expected builtin, openai or command, got \"gpt\"",
    ),
    (
        "openai without model",
        "[server]\ndata_dir = \"/d\"\n[agent]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"",
        "agent.model: required key is missing",
    ),
    (
        "inline api key",
        "[server]\ndata_dir = \"/d\"\n[agent]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\napi_key = \"sk-123\"",
        "agent.api_key: unknown key; secrets are never written in the config",
    ),
    (
        "command without argv",
        "[server]\ndata_dir = \"/d\"\n[agent]\nkind = \"command\"",
        "agent.argv: required for kind = \"command\"",
    ),
    (
        "url with credentials",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"/k\" }\napi_url = \"https://user:pw@ghe.example\"",
        "github.api_url: expected an https URL (plain http only to 127.0.0.1, [::1] or localhost) without credentials",
    ),
    (
        "plain http api_url to another host",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"/k\" }\napi_url = \"http://ghe.example\"",
        "github.api_url: plain http is allowed only to this machine (127.0.0.1, [::1], localhost), got \"http://ghe.example\"; use https://",
    ),
    (
        "plain http git_url to another host",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"/k\" }\ngit_url = \"http://10.0.0.5:8080\"",
        "github.git_url: plain http is allowed only to this machine",
    ),
    (
        "plain http oidc_issuer to a host named like loopback",
        "[server]\ndata_dir = \"/d\"\n[github]\napp_id = 1\nprivate_key = { file = \"/k\" }\noidc_issuer = \"http://localhost.evil.example\"",
        "github.oidc_issuer: plain http is allowed only to this machine",
    ),
    (
        "plain http public_url to another host",
        "[server]\ndata_dir = \"/d\"\npublic_url = \"http://127.0.0.1.evil.example\"",
        "server.public_url: plain http is allowed only to this machine",
    ),
    (
        "plain http agent base_url to another host",
        "[server]\ndata_dir = \"/d\"\n[agent]\nkind = \"openai\"\nbase_url = \"http://llm.internal:8000/v1\"\nmodel = \"m\"",
        "agent.base_url: plain http is allowed only to this machine",
    ),
    (
        "plain http allowed origin to another host",
        "[server]\ndata_dir = \"/d\"\n[api]\nallowed_origins = [\"http://intranet.example\"]",
        "api.allowed_origins[0]: plain http is allowed only to this machine",
    ),
    (
        "local wiki is the source itself",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/app\"\nlocal_wiki_path = \"/srv/app/\"\nwebhook_secret_env = \"S\"",
        "sources[0].local_wiki_path: is the source repository itself (local_path); give the wiki a repository of its own",
    ),
    (
        "local wiki is another source",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/app\"\nlocal_wiki_path = \"/srv/lib\"\nwebhook_secret_env = \"S\"\n[[sources]]\nrepository = \"octo/lib\"\nlocal_path = \"/srv/lib\"\nlocal_wiki_path = \"/srv/lib.wiki\"\nwebhook_secret_env = \"S\"",
        "sources[0].local_wiki_path: is the source repository of sources[1] (octo/lib); give octo/app a wiki repository of its own",
    ),
    (
        "local source with a GitHub wiki",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/app\"\nlocal_wiki_path = \"/srv/app.wiki\"\nwiki_repository = \"octo/memory\"\nwebhook_secret_env = \"S\"",
        "sources[0].wiki_repository: not used by a local source",
    ),
    (
        "not a url scheme",
        "[server]\ndata_dir = \"/d\"\npublic_url = \"ftp://x.example\"",
        "server.public_url: expected an https URL",
    ),
    (
        "protected page that is no page path",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\nprotected_pages = [\"Home.md\", \"../Home\"]",
        "sources[0].protected_pages[1]: \"../Home\" is not a wiki page path",
    ),
    (
        "protected pages not a list",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"S\"\nprotected_pages = \"Home.md\"",
        "sources[0].protected_pages: expected an array of strings",
    ),
    (
        "zero changed bytes",
        "[server]\ndata_dir = \"/d\"\n[agent]\nmax_changed_bytes = 0",
        "agent.max_changed_bytes: expected a number from 1 to 1073741824, got 0",
    ),
    (
        "zero header timeout",
        "[server]\ndata_dir = \"/d\"\nheader_timeout_seconds = 0",
        "server.header_timeout_seconds: expected a number from 1 to 300, got 0",
    ),
    (
        "zero connections",
        "[server]\ndata_dir = \"/d\"\nmax_connections = 0",
        "server.max_connections: expected a number from 1 to 65536, got 0",
    ),
    (
        "request timeout as text",
        "[server]\ndata_dir = \"/d\"\nrequest_timeout_seconds = \"1m\"",
        "server.request_timeout_seconds: expected an integer, got string",
    ),
    (
        "loopback trust as text",
        "[server]\ndata_dir = \"/d\"\n[dashboard]\ntrust_loopback = \"yes\"",
        "dashboard.trust_loopback: expected true or false, got string",
    ),
    (
        "unknown dashboard key",
        "[server]\ndata_dir = \"/d\"\n[dashboard]\ntrust = true",
        "dashboard.trust: unknown key",
    ),
    (
        "remote database without sslmode",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@db.internal:5432/teammem\"",
        "database.url: db.internal is not this machine and the URL names no sslmode",
    ),
    (
        "remote database with sslmode=prefer",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@10.0.0.5/teammem?sslmode=prefer\"",
        "database.url: sslmode=prefer to 10.0.0.5 does not verify the server",
    ),
    (
        "remote database with sslmode=require",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@db.internal/teammem?sslmode=require\"",
        "use sslmode=verify-full instead",
    ),
    (
        "remote database with sslmode=disable",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@db.internal/teammem?sslmode=disable\"",
        "database.url: sslmode=disable to db.internal does not verify the server",
    ),
    (
        "remote database with verify-ca and no root certificate",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@db.internal/teammem?sslmode=verify-ca\"",
        "database.url: sslmode=verify-ca to db.internal needs the root certificate it verifies against: add sslrootcert=",
    ),
    (
        "remote database named in a host parameter",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@localhost/teammem?host=db.internal\"",
        "database.url: db.internal is not this machine",
    ),
    (
        "env_allow hands the agent a dispatch secret",
        "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"TEAMMEM_SECRET_APP\"\n[agent]\nkind = \"command\"\nargv = [\"agent\"]\nenv_allow = [\"PATH\", \"TEAMMEM_SECRET_APP\"]",
        "agent.env_allow[1]: TEAMMEM_SECRET_APP is the secret sources[0].webhook_secret_env names; the agent must never be given it",
    ),
    (
        "env_allow hands the agent the database password",
        "[server]\ndata_dir = \"/d\"\n[database]\nurl = \"postgres://teammem@127.0.0.1/teammem\"\npassword_env = \"TEAMMEM_DB_PASSWORD\"\n[agent]\nkind = \"command\"\nargv = [\"agent\"]\nenv_allow = [\"TEAMMEM_DB_PASSWORD\"]",
        "agent.env_allow[0]: TEAMMEM_DB_PASSWORD is the secret database.password_env names",
    ),
    (
        "bool as string",
        "[server]\ndata_dir = \"/d\"\n[api]\nallow_github_tokens = \"yes\"",
        "api.allow_github_tokens: expected true or false, got string",
    ),
];

#[test]
fn bad_configs_are_refused_with_the_key_and_reason() {
    let mut failures = Vec::new();
    for (name, text, expected) in BAD {
        match Config::parse(text) {
            Ok(_) => failures.push(format!(
                "{name}: accepted, expected an error containing {expected:?}"
            )),
            Err(errors) => {
                if !errors.0.iter().any(|e| e.contains(expected)) {
                    failures.push(format!(
                        "{name}: expected {expected:?} among {:?}",
                        errors.0
                    ));
                }
                for e in &errors.0 {
                    if e.ends_with('.') {
                        failures.push(format!("{name}: message ends with a period: {e:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The database rule's other side: this machine's addresses and socket
/// directories (what the tests' own PostgreSQL uses) need no TLS, and a
/// remote server verified over TLS is accepted; an `env_allow` naming no
/// secret's variable is accepted.
#[test]
fn local_databases_and_verified_remote_ones_are_accepted() {
    for url in [
        "postgres://teammem@127.0.0.1:5432/teammem",
        "postgres://teammem@localhost/teammem",
        "postgres://teammem@[::1]:5432/teammem",
        "postgres:///teammem?host=/run/postgresql",
        "postgres://teammem@db.internal/teammem?sslmode=verify-full",
        "postgres://teammem@db.internal/teammem?sslmode=verify-ca&sslrootcert=/etc/teammem/db-ca.pem",
    ] {
        let text = format!("[server]\ndata_dir = \"/d\"\n[database]\nurl = \"{url}\"");
        if let Err(e) = Config::parse(&text) {
            panic!("{url} refused: {e}");
        }
    }
    let text = "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"TEAMMEM_SECRET_APP\"\n[agent]\nkind = \"command\"\nargv = [\"agent\"]\nenv_allow = [\"PATH\", \"ANTHROPIC_API_KEY\"]";
    Config::parse(text).unwrap();
}

#[test]
fn all_problems_are_reported_together() {
    let text =
        "[server]\ndata_dir = \"/d\"\nlisten = \"x\"\n[queue]\nworkers = 0\nmax_attempts = 0";
    let errors = Config::parse(text).unwrap_err();
    assert_eq!(errors.0.len(), 3, "{errors}");
}

#[test]
fn inline_secrets_never_echoed_back() {
    let text = "[server]\ndata_dir = \"/d\"\npublic_url = \"ghp_SUPERSECRETTOKEN\"";
    let errors = Config::parse(text).unwrap_err();
    assert!(!errors.to_string().contains("SUPERSECRET"), "{errors}");
}

#[test]
fn environment_check_names_the_missing_variable() {
    let text = "[server]\ndata_dir = \"/d\"\n[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/a\"\nlocal_wiki_path = \"/b\"\nwebhook_secret_env = \"TEAMMEM_TEST_SURELY_UNSET_VAR\"";
    let c = Config::parse(text).unwrap();
    let errors = c.check_environment().unwrap_err();
    assert!(
        errors.0[0].contains("sources[0].webhook_secret_env: environment variable TEAMMEM_TEST_SURELY_UNSET_VAR is not set"),
        "{errors}"
    );
}

#[test]
fn plain_http_is_accepted_to_this_machine_only() {
    for url in [
        "http://127.0.0.1:8080",
        "http://[::1]:9/api",
        "http://localhost",
        "http://LOCALHOST:3000/v1",
        "https://ghe.example/api/v3",
    ] {
        let text = format!(
            "[server]\ndata_dir = \"/d\"\npublic_url = \"{url}\"\n[agent]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\n[github]\napp_id = 1\nprivate_key = {{ file = \"/k\" }}\napi_url = \"{url}\"\ngit_url = \"{url}\"\noidc_issuer = \"{url}\""
        );
        if let Err(e) = Config::parse(&text) {
            panic!("{url} refused: {e}");
        }
    }
    for url in [
        "http://127.0.0.2",
        "http://[::1].evil",
        "http://localhost:notaport",
        "http://[::2]:80",
    ] {
        let text = format!("[server]\ndata_dir = \"/d\"\npublic_url = \"{url}\"");
        assert!(Config::parse(&text).is_err(), "{url} accepted");
    }
}

#[test]
fn the_database_is_sqlite_unless_a_postgres_url_is_given() {
    let c = Config::parse(MINIMAL).unwrap();
    assert_eq!(c.database, Database::Sqlite);
    assert!(!c.server.node_id.is_empty(), "the host name by default");

    let text = "[server]\ndata_dir = \"/d\"\nnode_id = \"node-a\"\n[database]\nurl = \"postgres://teammem@db.internal:5432/teammem?sslmode=verify-full\"\npassword_env = \"TEAMMEM_TEST_DB_PASSWORD_UNSET\"";
    let c = Config::parse(text).unwrap();
    assert_eq!(c.server.node_id, "node-a");
    let Database::Postgres(pg) = &c.database else {
        panic!("expected PostgreSQL, got {:?}", c.database);
    };
    assert_eq!(
        pg.max_connections,
        teammem::config::DEFAULT_DATABASE_CONNECTIONS
    );
    assert_eq!(pg.location(), "db.internal:5432/teammem");
    assert!(
        c.secret_env_names()
            .contains(&"TEAMMEM_TEST_DB_PASSWORD_UNSET".to_string()),
        "the password variable is moved out of the environment at start"
    );
    let errors = c.check_environment().unwrap_err();
    assert!(
        errors.0.iter().any(|e| e.contains(
            "database.password_env: environment variable TEAMMEM_TEST_DB_PASSWORD_UNSET is not set"
        )),
        "{errors}"
    );
}

#[test]
fn a_database_url_with_a_password_is_refused_without_echoing_it() {
    for url in [
        "postgres://teammem:S3CRETPASS@db/teammem",
        "postgres://db/teammem?password=S3CRETPASS",
    ] {
        let text = format!("[server]\ndata_dir = \"/d\"\n[database]\nurl = \"{url}\"");
        let errors = Config::parse(&text).unwrap_err();
        assert!(
            errors
                .0
                .iter()
                .any(|e| e.starts_with("database.url: holds a password")),
            "{errors}"
        );
        assert!(!errors.to_string().contains("S3CRETPASS"), "{errors}");
    }
    for (text, expected) in [
        (
            "[database]\nurl = \"mysql://db/x\"",
            "database.url: expected a postgres:// URL",
        ),
        ("[database]\npassword_env = \"X\"", "database.url: required"),
        (
            "[database]\nurl = \"postgres://db/x\"\npassword_env = \"lower\"",
            "database.password_env: expected the NAME",
        ),
        (
            "[database]\nurl = \"postgres://db/x\"\nmax_connections = 0",
            "database.max_connections",
        ),
        (
            "[database]\nurl = \"postgres://db/x\"\npassword = \"x\"",
            "database.password: unknown key",
        ),
        (
            "[server]\nnode_id = \"node a\"",
            "server.node_id: expected 1 to 64",
        ),
    ] {
        let text = if text.starts_with("[server]") {
            format!("{text}\ndata_dir = \"/d\"")
        } else {
            format!("[server]\ndata_dir = \"/d\"\n{text}")
        };
        let errors = Config::parse(&text).unwrap_err();
        assert!(
            errors.0.iter().any(|e| e.contains(expected)),
            "{expected:?} among {errors}"
        );
    }
}
