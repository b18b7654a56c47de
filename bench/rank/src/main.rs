//! Ranks one generated 1,000-page wiki with teammem's BM25 index and with the
//! `bm25` crate's search engine, and prints for each: the index build time,
//! warm query p50/p99 over the same queries, and how often the page written
//! about a query's topic ranks first (precision at 1).
//!
//! The wiki: 100 topic pages, each about one two-word topic from a fixed
//! vocabulary (title, a heading and a paragraph about it), and 900 filler
//! pages that use the same words one at a time, so a word alone does not
//! find its topic. Generated deterministically: every run ranks the same text.

use std::time::Instant;

const WORDS: &[&str] = &[
    "queue", "worker", "lease", "cursor", "dashboard", "sweep", "token", "mirror", "deploy",
    "config", "invoice", "retries", "schema", "render", "cache", "parser", "session", "limit",
    "backoff", "webhook", "branch", "receipt", "snapshot", "publish", "metrics",
];
const TOPICS: usize = 100;
const FILLERS: usize = 900;

/// A small deterministic generator (xorshift), so runs compare the same text.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as usize
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }
}

/// The two words of topic `i` (distinct pairs).
fn topic(i: usize) -> (&'static str, &'static str) {
    let a = i % WORDS.len();
    let b = (a + 1 + i / WORDS.len()) % WORDS.len();
    (WORDS[a], WORDS[b])
}

fn title_case(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// `(path, text)` of every page, topic pages first.
fn wiki() -> Vec<(String, String)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pages = Vec::new();
    for i in 0..TOPICS {
        let (a, b) = topic(i);
        let filler: Vec<&str> = (0..60).map(|_| rng.word()).collect();
        pages.push((
            format!("Topics/{}_{}_{i}.md", title_case(a), title_case(b)),
            format!(
                "# {} {b}\n\nHow the {a} {b} works and why.\n\n## Details\n\nEvery {a} {b} change is recorded. {}\n",
                title_case(a),
                filler.join(" ")
            ),
        ));
    }
    for i in 0..FILLERS {
        let mut body: Vec<&str> = Vec::new();
        for _ in 0..80 {
            // Words one at a time: never two topic words side by side on
            // purpose, but the vocabulary is the same.
            body.push(rng.word());
            body.push("and");
        }
        pages.push((
            format!("notes/Page{i:04}.md"),
            format!("# Notes {i}\n\n## Section\n\n{}\n", body.join(" ")),
        ));
    }
    pages
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Figures {
    build_ms: f64,
    p50_us: f64,
    p99_us: f64,
    first: usize,
}

fn measure(build: impl FnOnce() -> Box<dyn Fn(&str) -> Option<String>>, queries: &[(String, String)]) -> Figures {
    let started = Instant::now();
    let search = build();
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut first = 0;
    for (query, expected) in queries {
        if search(query).as_deref() == Some(expected.as_str()) {
            first += 1;
        }
    }
    let mut times = Vec::new();
    for round in 0..10 {
        for (query, _) in queries.iter().skip(round % 3) {
            let started = Instant::now();
            std::hint::black_box(search(query));
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    Figures {
        build_ms,
        p50_us: percentile(&times, 0.5),
        p99_us: percentile(&times, 0.99),
        first,
    }
}

fn main() {
    let pages = wiki();
    let queries: Vec<(String, String)> = (0..TOPICS)
        .map(|i| {
            let (a, b) = topic(i);
            (format!("{a} {b}"), pages[i].0.clone())
        })
        .collect();
    let bytes: usize = pages.iter().map(|(_, text)| text.len()).sum();
    println!(
        "{} pages ({} KiB), {} two-word topic queries, cores: {}",
        pages.len(),
        bytes / 1024,
        queries.len(),
        std::thread::available_parallelism().map_or(1, usize::from)
    );

    let teammem_pages = pages.clone();
    let ours = measure(
        move || {
            let input = teammem_pages
                .into_iter()
                .map(|(path, text)| (path, String::new(), text))
                .collect();
            let index = teammem::wiki::search::SearchIndex::build(input, bytes as u64, false);
            let commit = gix::ObjectId::null(gix::hash::Kind::Sha1);
            Box::new(move |query: &str| {
                index
                    .search(commit, query)
                    .hits
                    .into_iter()
                    .next()
                    .map(|hit| hit.path)
            })
        },
        &queries,
    );
    let crate_pages = pages.clone();
    let theirs = measure(
        move || {
            let paths: Vec<String> = crate_pages.iter().map(|(path, _)| path.clone()).collect();
            // The crate indexes text only: the title goes in with the body,
            // as a reader of the page sees it.
            let documents: Vec<bm25::Document<u32>> = crate_pages
                .iter()
                .enumerate()
                .map(|(i, (path, text))| {
                    bm25::Document::new(i as u32, format!("{}\n{text}", path.replace(['/', '_'], " ")))
                })
                .collect();
            let engine = bm25::SearchEngineBuilder::<u32>::with_documents(
                bm25::Language::English,
                documents,
            )
            .build();
            Box::new(move |query: &str| {
                engine
                    .search(query, 20)
                    .into_iter()
                    .next()
                    .map(|hit| paths[hit.document.id as usize].clone())
            })
        },
        &queries,
    );
    for (name, f) in [("teammem (src/wiki/search.rs)", &ours), ("bm25 crate 2.x", &theirs)] {
        println!(
            "{name}: build {:.1} ms, query p50 {:.0} µs, p99 {:.0} µs, topic page first for {}/{} queries",
            f.build_ms, f.p50_us, f.p99_us, f.first, TOPICS
        );
    }
    println!(
        "teammem / bm25 crate: build {:.2}x, query p50 {:.2}x (below 1 = teammem faster); precision at 1: {} vs {}",
        ours.build_ms / theirs.build_ms,
        ours.p50_us / theirs.p50_us,
        ours.first,
        theirs.first
    );
}
