//! `gen-history DIR [PRS] [SEED]`: generates the long source history of
//! `tests/it/harness/history.rs` at DIR (a new git repository, `main`
//! checked out as HEAD) and prints what a replay needs, one record a line:
//! `push BEFORE AFTER MERGES` for every push to `main` (oldest first), then
//! `pull NUMBER SHA HOW` for every merged pull request. Deterministic: the
//! same PRS and SEED give the same commits as the integration test's.

#[path = "../../../tests/it/harness/history.rs"]
mod history;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: gen-history DIR [PRS (default 1500)] [SEED (default 36)]";
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| {
        eprintln!("{usage}");
        std::process::exit(2)
    }));
    let defaults = history::Spec::default();
    let number = |text: Option<String>, default: u64, what: &str| -> u64 {
        match text {
            None => default,
            Some(t) => t.parse().unwrap_or_else(|_| {
                eprintln!("gen-history: {what} must be a number, got {t:?}; {usage}");
                std::process::exit(2)
            }),
        }
    };
    let prs = number(args.next(), defaults.prs as u64, "PRS") as usize;
    let seed = number(args.next(), defaults.seed, "SEED");
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        eprintln!(
            "gen-history: {} exists and is not empty; name a new directory",
            dir.display()
        );
        std::process::exit(2);
    }
    let h = history::generate(&dir, &history::Spec { prs, seed });
    let mut out = String::new();
    for p in &h.pushes {
        out.push_str(&format!("push {} {} {}\n", p.before, p.after, p.merges));
    }
    for p in &h.pulls {
        out.push_str(&format!("pull {} {} {:?}\n", p.number, p.sha, p.how));
    }
    print!("{out}");
}
