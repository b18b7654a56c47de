//! A generated history recorded by the real `teammem serve` (local forge,
//! builtin agent), built by each test that reads its wiki: a small shop
//! with six areas, fifteen squash-merged pull requests by six authors over
//! two quarters, a `pyproject.toml` whose dependencies change, and a page a
//! person wrote between the two pushes, citing lines of
//! `billing/invoice.py` that pull request #12 later changes (so one of its
//! facts goes stale, with #12's commit) and a line nothing changes.
//!
//! The daemon is stopped once the second job succeeded (unless the caller
//! keeps it serving), so readers open the wiki and database alone;
//! everything is removed when the value drops.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::daemon::Setup;
use crate::harness::git::{git, git_trimmed, git_with_env};
use crate::runner::daemon_client::{finished, post_dispatch, wait_for};
use crate::runner::fixture;

pub const REPOSITORY: &str = "demo/shop";
/// A second configured source (one commit, an untouched wiki).
pub const OTHER: &str = "demo/elsewhere";
const SECRET: &str = "history dispatch secret, at least 32 bytes long";

/// The built history.
pub struct History {
    /// The daemon, when the caller asked to keep it serving.
    pub daemon: Option<crate::harness::daemon::Daemon>,
    pub setup: Setup,
    _repos: tempfile::TempDir,
    pub config: PathBuf,
    /// Merge sha of each pull request, by number (index 0 unused).
    pub merged: Vec<String>,
    /// The source commit the person's facts cite.
    pub cited: String,
    /// The shop's bare wiki repository.
    pub wiki: PathBuf,
}

/// One pull request of the history: number, author, date, title, why, files.
struct Pull {
    author: &'static str,
    date: &'static str,
    title: &'static str,
    why: &'static str,
    files: &'static [(&'static str, &'static str)],
}

const INVOICE_V1: &str = "\"\"\"Invoices: totals, taxes and the PDF an order's customer receives.\"\"\"\n\ndef tax(total):\n    return round(total * 0.2, 2)\n\nNUMBERING = \"per year\"\n";
const INVOICE_V2: &str = "\"\"\"Invoices: totals, taxes and the PDF an order's customer receives.\"\"\"\n\ndef tax(total):\n    return round(total * 0.2, 2)\n\nNUMBERING = \"per year\"\n\ndef charge(order):\n    return stripe_checkout(order)\n";
const INVOICE_V3: &str = "\"\"\"Invoices: totals, taxes and the PDF an order's customer receives.\"\"\"\n\ndef tax(lines):\n    return sum(round(line * 0.2, 2) for line in lines)\n\nNUMBERING = \"per year\"\n\ndef charge(order):\n    return stripe_checkout(order)\n";

const PULLS: &[Pull] = &[
    Pull {
        author: "Alice",
        date: "2026-01-10",
        title: "Serve the product catalogue over REST",
        why: "Shoppers can browse products without logging in; the catalogue is read-only JSON.",
        files: &[
            (
                "api/handlers.py",
                "\"\"\"HTTP handlers for the shop's REST API: carts, orders and products.\"\"\"\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"shop\"\ndependencies = [\n  \"fastapi==0.109.0\",\n]\n",
            ),
        ],
    },
    Pull {
        author: "Bob",
        date: "2026-01-20",
        title: "Keep carts in PostgreSQL",
        why: "Carts survive a restart and are shared across app servers.",
        files: &[(
            "storage/db.py",
            "\"\"\"PostgreSQL connection pool and migrations.\"\"\"\n",
        )],
    },
    Pull {
        author: "Carol",
        date: "2026-02-02",
        title: "Cache product lookups in Redis",
        why: "The catalogue page made 40 queries per view; a 60-second Redis cache cuts them to one.",
        files: &[
            (
                "storage/cache.py",
                "\"\"\"A Redis cache in front of product lookups.\"\"\"\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"shop\"\ndependencies = [\n  \"fastapi==0.109.0\",\n  \"redis==5.0.1\",\n]\n",
            ),
        ],
    },
    Pull {
        author: "Dave",
        date: "2026-02-11",
        title: "Sign session cookies",
        why: "Unsigned cookies let anyone impersonate a shopper; cookies are now HMAC-signed and checked on every request.",
        files: &[(
            "api/auth.py",
            "\"\"\"Session authentication: signed cookies checked on every request.\"\"\"\n",
        )],
    },
    Pull {
        author: "Erin",
        date: "2026-02-20",
        title: "Invoices as PDF",
        why: "Customers asked for a printable invoice; each paid order now gets a PDF with totals and taxes.",
        files: &[("billing/invoice.py", INVOICE_V1)],
    },
    Pull {
        author: "Alice",
        date: "2026-03-01",
        title: "Charge cards through Stripe",
        why: "Payments move from the manual bank transfer to Stripe Checkout.",
        files: &[
            ("billing/invoice.py", INVOICE_V2),
            (
                "pyproject.toml",
                "[project]\nname = \"shop\"\ndependencies = [\n  \"fastapi==0.109.0\",\n  \"redis==5.0.1\",\n  \"stripe==8.0.0\",\n]\n",
            ),
        ],
    },
    Pull {
        author: "Bob",
        date: "2026-03-09",
        title: "Coupon codes in the cart",
        why: "Marketing needs percentage and fixed-amount coupons; the cart page validates them before checkout.",
        files: &[
            (
                "web/cart.js",
                "// The cart page: quantities, coupon codes and checkout.\n",
            ),
            (
                "api/handlers.py",
                "\"\"\"HTTP handlers for the shop's REST API: carts, orders and products.\"\"\"\n\nCOUPONS = True\n",
            ),
        ],
    },
    Pull {
        author: "Frank",
        date: "2026-03-18",
        title: "Write the deployment guide",
        why: "New operators kept asking how to deploy; the guide covers the container image, migrations and rollbacks.",
        files: &[(
            "docs/deploy.md",
            "# Deploying the shop\n\nBuild the image.\n",
        )],
    },
    Pull {
        author: "Erin",
        date: "2026-04-03",
        title: "Refunds within 30 days",
        why: "Support refunded by hand; refunds now go back to the card automatically within 30 days.",
        files: &[(
            "billing/refunds.py",
            "\"\"\"Refunds go back to the card that paid, within 30 days.\"\"\"\n",
        )],
    },
    Pull {
        author: "Carol",
        date: "2026-04-14",
        title: "Expire cached products on price change",
        why: "A price change showed the old price for up to a minute; the cache entry is now dropped when the price changes.",
        files: &[(
            "storage/cache.py",
            "\"\"\"A Redis cache in front of product lookups.\"\"\"\n\nEXPIRE_ON_PRICE_CHANGE = True\n",
        )],
    },
    Pull {
        author: "Dave",
        date: "2026-04-22",
        title: "Rate limit the login endpoint",
        why: "Credential stuffing hit the login endpoint; more than 10 attempts a minute from one address get a 429.",
        files: &[(
            "api/auth.py",
            "\"\"\"Session authentication: signed cookies checked on every request.\"\"\"\n\nLOGIN_ATTEMPTS_PER_MINUTE = 10\n",
        )],
    },
    Pull {
        author: "Erin",
        date: "2026-05-05",
        title: "Round taxes per line, not per invoice",
        why: "Invoices disagreed with receipts by a cent; taxes are now rounded on each line as the tax office requires.",
        files: &[("billing/invoice.py", INVOICE_V3)],
    },
    Pull {
        author: "Bob",
        date: "2026-05-19",
        title: "Checkout button waits for payment",
        why: "Double clicks created two orders; the checkout button is disabled until the payment answer arrives.",
        files: &[(
            "web/cart.js",
            "// The cart page: quantities, coupon codes and checkout.\n\nconst WAIT_FOR_PAYMENT = true;\n",
        )],
    },
    Pull {
        author: "Frank",
        date: "2026-06-01",
        title: "Document rollbacks",
        why: "An operator rolled back by hand and lost a migration; the guide now shows the rollback command and its checks.",
        files: &[(
            "docs/deploy.md",
            "# Deploying the shop\n\nBuild the image.\n\n## Rolling back\n\nRun the rollback command.\n",
        )],
    },
    Pull {
        author: "Alice",
        date: "2026-06-12",
        title: "Upgrade fastapi",
        why: "fastapi 0.110 fixes the slow startup with many routes.",
        files: &[(
            "pyproject.toml",
            "[project]\nname = \"shop\"\ndependencies = [\n  \"fastapi==0.110.0\",\n  \"redis==5.0.1\",\n  \"stripe==8.0.0\",\n]\n",
        )],
    },
];

/// The person's page, citing `billing/invoice.py` at `cited`: lines 3-4
/// (which #12 changes) and line 6 (which nothing changes).
pub fn notes_page(cited: &str) -> String {
    format!(
        "# Billing notes\n\nWritten by the billing team.\n\n## Taxes\n\n\
         Taxes are computed on the invoice total and rounded once. <!-- teammem:evidence billing/invoice.py@{cited}#L3-L4 -->\n\
         Invoice numbers restart every year. <!-- teammem:evidence billing/invoice.py@{cited}#L6 -->\n"
    )
}

/// Commits `pull` as a squash merge by its author on its date.
fn squash(dir: &Path, number: usize, pull: &Pull) -> String {
    for (path, content) in pull.files {
        fixture::write(dir, path, content);
    }
    git(dir, &["add", "-A"]);
    let when = format!("{}T12:00:00+00:00", pull.date);
    let email = format!("{}@example.org", pull.author.to_lowercase());
    git_with_env(
        dir,
        &[
            ("GIT_AUTHOR_NAME", pull.author),
            ("GIT_AUTHOR_EMAIL", &email),
            ("GIT_COMMITTER_NAME", pull.author),
            ("GIT_COMMITTER_EMAIL", &email),
            ("GIT_AUTHOR_DATE", &when),
            ("GIT_COMMITTER_DATE", &when),
        ],
        &[
            "commit",
            "-q",
            "-m",
            &format!("{} (#{number})", pull.title),
            "-m",
            pull.why,
        ],
    );
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

/// Builds the history (about a second: two jobs of the builtin agent).
pub async fn build() -> History {
    build_serving(false).await
}

/// [`build`], keeping the daemon serving when `serving`.
pub async fn build_serving(serving: bool) -> History {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("shop");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", "# shop\n\nA small web shop.\n");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    let wiki = fixture::wiki(repos.path());
    // A second source, so a token can be limited to another repository.
    let other_root = repos.path().join("other");
    let other = other_root.join("app");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    fixture::write(&other, "README.md", "# other\n");
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-q", "-m", "Initial commit"]);
    let other_wiki = fixture::wiki(&other_root);
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"{REPOSITORY}\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_SHOP\"\n\n[[sources]]\nrepository = \"{OTHER}\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_SHOP\"\n",
        dir.display(),
        wiki.display(),
        other.display(),
        other_wiki.display()
    ));
    let token = setup.create_token("history", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_SHOP", SECRET)]);
    let mut run = 0;
    let mut dispatch = async |before: &str, after: &str| {
        run += 1;
        let (status, answer) = post_dispatch(
            &daemon,
            SECRET,
            &json!({
                "source_repository": REPOSITORY, "kind": "range",
                "source_run_id": run, "source_run_attempt": 1,
                "push_before": before, "push_after": after,
            }),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let id = answer["job_id"].as_i64().unwrap();
        let (job, events) = wait_for(&daemon, &token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job} {events}");
    };
    let mut merged = vec![String::new()];
    for (index, pull) in PULLS.iter().enumerate().take(11) {
        merged.push(squash(&dir, index + 1, pull));
    }
    dispatch(&base, &merged[11]).await;

    // A person's page between the pushes, through a clone of the wiki.
    let work = repos.path().join("wiki-person");
    git(
        repos.path(),
        &[
            "clone",
            "-q",
            wiki.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    let cited = merged[11].clone();
    fixture::write(&work, "Billing-notes.md", &notes_page(&cited));
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "Billing notes"]);
    git(&work, &["push", "-q", "origin", "HEAD:master"]);

    for (index, pull) in PULLS.iter().enumerate().skip(11) {
        merged.push(squash(&dir, index + 1, pull));
    }
    dispatch(&merged[11], &merged[15]).await;
    let daemon = if serving {
        Some(daemon)
    } else {
        daemon.terminate();
        None
    };
    History {
        daemon,
        config: setup.config.clone(),
        setup,
        _repos: repos,
        merged,
        cited,
        wiki,
    }
}
