//! Repository lints: rules that fade unless a test checks them (docs/style.md#tidy-rules).
//!
//! Each test walks the repository's files (those git tracks, plus new files it does not ignore)
//! and fails with every offending place listed, so one run shows all there is to fix:
//! - lines of Rust source at most 100 columns;
//! - glommio named only inside comet-rt;
//! - in the server crates, time read only through `comet_rt::clock`;
//! - every dependency a crate declares is used by that crate;
//! - comments and docs cite only documents inside the repository, and every `docs/...md#anchor`
//!   citation names a file and a heading that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The widest a line of Rust source may be, in columns (rustfmt's default width).
const LINE_COLUMNS_MAX: usize = 100;

/// Source folders of the server crates, where time is read only through the clock seam so that
/// a simulation can drive it.
const CLOCK_SEAM_FOLDERS: &[&str] = &[
    "broker/src/",
    "broker/store/src/",
    "broker/net/src/",
    "broker/rt/src/",
    "broker/replication/src/",
    "nameserver/src/",
];

/// The one module allowed to read the system clocks.
const CLOCK_MODULE: &str = "broker/rt/src/clock.rs";

/// The one crate allowed to name glommio.
const RUNTIME_CRATE: &str = "broker/rt/";

fn repository_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .expect("tools/ sits in the repository root")
        .to_path_buf()
}

/// Files of the repository, relative to its root, as git sees them (tracked, or new and not
/// ignored). Paths that no longer exist on disk (deleted but not yet committed) are skipped.
fn repository_files() -> Vec<String> {
    let root = repository_root();
    let output = Command::new("git")
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
        ])
        .current_dir(&root)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git ls-files failed");
    let listing = String::from_utf8(output.stdout).expect("file names are UTF-8");
    let mut files: Vec<String> = listing
        .split('\0')
        .filter(|name| !name.is_empty())
        .filter(|name| root.join(name).is_file())
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

fn read(relative: &str) -> String {
    let path = repository_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_default()
}

/// This file: it quotes the patterns it looks for, so the checks that would find them skip it.
const THIS_FILE: &str = "tools/tests/tidy.rs";

/// The text sources whose citations are checked: every one but [`THIS_FILE`].
fn citing_sources() -> Vec<String> {
    repository_files()
        .into_iter()
        .filter(|name| is_text_source(name) && name != THIS_FILE)
        .collect()
}

fn is_text_source(name: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        ".rs", ".md", ".sh", ".toml", ".py", ".java", ".go", ".js", ".yml", ".xml",
    ];
    EXTENSIONS.iter().any(|extension| name.ends_with(extension)) || name == ".ci/run"
}

fn fail_with(rule: &str, offenders: &[String]) {
    assert!(
        offenders.is_empty(),
        "{rule}: {} place(s)\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

// Proves every line of Rust source fits in 100 columns: rustfmt wraps code but not comments
// or string literals, so a long doc line would otherwise slip through.
#[test]
fn rust_lines_fit_in_100_columns() {
    let mut offenders = Vec::new();
    for name in repository_files()
        .iter()
        .filter(|name| name.ends_with(".rs"))
    {
        for (index, line) in read(name).lines().enumerate() {
            let columns = line.chars().count();
            if columns > LINE_COLUMNS_MAX {
                offenders.push(format!("{name}:{}: {columns} columns", index + 1));
            }
        }
    }
    fail_with("lines over 100 columns", &offenders);
}

// Proves glommio stays behind the runtime seam: no other crate depends on it or names it, so
// the runtime can be swapped or simulated.
#[test]
fn glommio_is_named_only_in_the_runtime_crate() {
    let mut offenders = Vec::new();
    for name in repository_files() {
        let exempt = name.starts_with(RUNTIME_CRATE) || name == THIS_FILE;
        if exempt || name == "Cargo.toml" || name == "Cargo.lock" {
            continue;
        }
        let checked = name.ends_with(".rs") || name.ends_with("Cargo.toml");
        if !checked {
            continue;
        }
        for (index, line) in read(&name).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let named = code.contains("glommio::")
                || code.contains("use glommio")
                || (name.ends_with("Cargo.toml") && code.trim_start().starts_with("glommio"));
            if named {
                offenders.push(format!("{name}:{}: {}", index + 1, line.trim()));
            }
        }
    }
    fail_with("glommio named outside comet-rt", &offenders);
}

// Proves the server crates read time only through comet_rt::clock, the seam a simulation
// replaces; tests, examples and benchmarks may read the clocks directly.
#[test]
fn server_crates_read_time_only_through_the_clock_seam() {
    let mut offenders = Vec::new();
    for name in repository_files() {
        let in_server = CLOCK_SEAM_FOLDERS
            .iter()
            .any(|folder| name.starts_with(folder));
        if !in_server || !name.ends_with(".rs") || name == CLOCK_MODULE {
            continue;
        }
        let text = read(&name);
        for (index, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("Instant::now") || code.contains("SystemTime::now") {
                offenders.push(format!("{name}:{}: {}", index + 1, line.trim()));
            }
        }
    }
    fail_with("clocks read outside comet_rt::clock", &offenders);
}

/// Lines of a source file before its `#[cfg(test)]` module (unit tests may read the clocks).
fn non_test_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
}

/// Dependency edges the layering forbids (docs/style.md#crate-dependencies): the codec, the
/// file writer and the log set-up stand alone, the client never sees the server side, the
/// store never sees the network or the broker, the name server never sees the store or the
/// broker, and the replication core stays sans-I/O.
const FORBIDDEN_EDGES: &[(&str, &[&str])] = &[
    ("comet-proto", &["comet-"]),
    ("comet-fs", &["comet-"]),
    ("comet-log", &["comet-"]),
    (
        "comet-replication",
        &["comet-rt", "comet-net", "comet-store", "comet-broker"],
    ),
    (
        "comet-store",
        &["comet-net", "comet-broker", "comet-nameserver"],
    ),
    (
        "comet-client",
        &["comet-rt", "comet-net", "comet-store", "comet-broker"],
    ),
    ("comet-nameserver", &["comet-store", "comet-broker"]),
];

/// One crate's manifest: where it lives and what it declares.
struct Manifest {
    name: String,
    folder: String,
    dependencies: Vec<String>,
    dev_dependencies: Vec<String>,
}

fn manifests(files: &[String]) -> Vec<Manifest> {
    files
        .iter()
        .filter(|name| name.ends_with("Cargo.toml") && name.as_str() != "Cargo.toml")
        .map(|name| parse_manifest(name))
        .collect()
}

fn parse_manifest(name: &str) -> Manifest {
    let folder = name.trim_end_matches("Cargo.toml").to_owned();
    let mut dependencies = Vec::new();
    let mut dev_dependencies = Vec::new();
    let mut section = String::new();
    let mut package = String::new();
    for line in read(name).lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            continue;
        }
        if section == "package" && line.starts_with("name") {
            package = line.split('"').nth(1).unwrap_or("").to_owned();
        }
        let Some(key) = dependency_key(line) else {
            continue;
        };
        match section.as_str() {
            "dependencies" | "build-dependencies" => dependencies.push(key),
            "dev-dependencies" => dev_dependencies.push(key),
            _ => {}
        }
    }
    Manifest {
        name: package,
        folder,
        dependencies,
        dev_dependencies,
    }
}

/// The crate name a dependency line declares (`bytes = "1"`, `bytes.workspace = true`).
fn dependency_key(line: &str) -> Option<String> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let key = line.split(['=', '.']).next()?.trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then(|| key.to_owned())
}

/// Rust sources of the crate in `folder`, without those of crates nested inside it.
fn crate_sources<'a>(folder: &str, files: &'a [String], nested: &[String]) -> Vec<&'a String> {
    files
        .iter()
        .filter(|name| name.starts_with(folder) && name.ends_with(".rs"))
        .filter(|name| {
            !nested
                .iter()
                .any(|other| other.len() > folder.len() && name.starts_with(other.as_str()))
        })
        .collect()
}

/// Whether a path inside a crate holds only tests, benchmarks or examples, which may use
/// dev-dependencies.
fn is_test_only_source(inside_crate: &str) -> bool {
    ["tests/", "benches/", "examples/"]
        .iter()
        .any(|folder| inside_crate.starts_with(folder))
}

fn mentions_crate(text: &str, dependency: &str) -> bool {
    let ident = dependency.replace('-', "_");
    text.contains(&format!("{ident}::"))
        || text.contains(&format!("use {ident}"))
        || text.contains(&format!("extern crate {ident}"))
        || text.contains(&format!("{ident}!"))
}

// Proves no crate declares a dependency it does not use: every one costs build time and
// review, and a stale one hides what a crate really needs.
#[test]
fn every_declared_dependency_is_used() {
    let files = repository_files();
    let manifests = manifests(&files);
    let folders: Vec<String> = manifests
        .iter()
        .map(|manifest| manifest.folder.clone())
        .collect();
    let mut offenders = Vec::new();
    for manifest in &manifests {
        let sources = crate_sources(&manifest.folder, &files, &folders);
        let library: String = sources
            .iter()
            .filter(|name| !is_test_only_source(&name[manifest.folder.len()..]))
            .map(|name| read(name))
            .collect();
        let everything: String = sources.iter().map(|name| read(name)).collect();
        for dependency in &manifest.dependencies {
            if !mentions_crate(&library, dependency) {
                offenders.push(format!("{}Cargo.toml: `{dependency}`", manifest.folder));
            }
        }
        for dependency in &manifest.dev_dependencies {
            if !mentions_crate(&everything, dependency) {
                offenders.push(format!("{}Cargo.toml: dev `{dependency}`", manifest.folder));
            }
        }
    }
    fail_with("dependencies declared but not used", &offenders);
}

// Proves the crate graph keeps its layering: no crate depends on one the layering forbids, so
// the client stays free of the server runtime and the store free of the network.
#[test]
fn crates_depend_only_along_allowed_edges() {
    let files = repository_files();
    let mut offenders = Vec::new();
    for manifest in manifests(&files) {
        let Some((_, forbidden)) = FORBIDDEN_EDGES
            .iter()
            .find(|(crate_name, _)| *crate_name == manifest.name)
        else {
            continue;
        };
        for dependency in &manifest.dependencies {
            if forbidden
                .iter()
                .any(|prefix| dependency.starts_with(prefix))
            {
                offenders.push(format!("{} depends on {dependency}", manifest.name));
            }
        }
    }
    fail_with("forbidden dependency edges", &offenders);
}

/// Phrases that cite documents which are not part of the repository.
fn outside_citation(line: &str) -> Option<&'static str> {
    if line.contains("../shared") {
        return Some("../shared");
    }
    if line.contains("DESIGN.md") {
        return Some("DESIGN.md");
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    for pair in words.windows(2) {
        let next = pair[1].trim_end_matches([',', ')', ';', ':', '.']);
        if pair[0].ends_with("reference") && is_section_number(next) {
            return Some("reference N.N");
        }
        if pair[0].ends_with("trap") && is_trap_number(next) {
            return Some("trap TNN");
        }
        if pair[0].ends_with("STYLE") && is_style_item(next) {
            return Some("STYLE XN");
        }
    }
    None
}

fn is_section_number(word: &str) -> bool {
    let mut parts = word.split('.');
    let first = parts.next().unwrap_or("");
    let second = parts.next();
    !first.is_empty()
        && first.chars().all(|c| c.is_ascii_digit())
        && second.is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
}

fn is_trap_number(word: &str) -> bool {
    word.len() > 1 && word.starts_with('T') && word[1..].chars().all(|c| c.is_ascii_digit())
}

fn is_style_item(word: &str) -> bool {
    let mut chars = word.chars();
    let letter = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    let rest: String = chars.collect();
    letter && !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
}

// Proves comments and docs cite only documents inside the repository: a newcomer must be able
// to follow every citation from a clone alone.
#[test]
fn citations_stay_inside_the_repository() {
    let mut offenders = Vec::new();
    for name in &citing_sources() {
        for (index, line) in read(name).lines().enumerate() {
            if let Some(kind) = outside_citation(line) {
                offenders.push(format!(
                    "{name}:{}: cites {kind}: {}",
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    fail_with("citations of documents outside the repository", &offenders);
}

/// The GitHub anchor of a markdown heading: lower case, punctuation dropped, spaces to `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a markdown file offers, with GitHub's `-1`, `-2` suffixes for repeats.
fn anchors_of(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let base = heading_anchor(line.trim_start_matches('#'));
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        anchors.insert(anchor);
    }
    anchors
}

/// `docs/...md` citations in a line, each with its anchor if it names one.
fn docs_citations(line: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("docs/") {
        let preceded_by_path = rest[..start]
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        let tail = &rest[start..];
        let path_len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')))
            .unwrap_or(tail.len());
        let path = tail[..path_len].trim_end_matches('.');
        rest = &tail[path_len..];
        if preceded_by_path || !path.ends_with(".md") {
            continue;
        }
        let anchor = rest.strip_prefix('#').map(|after| {
            let len = after
                .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(after.len());
            after[..len].to_owned()
        });
        found.push((path.to_owned(), anchor));
    }
    found
}

// Proves every `docs/<file>.md#<anchor>` citation resolves: the file exists and has a heading
// with that anchor, so a renamed heading cannot leave comments pointing nowhere.
#[test]
fn docs_citations_resolve() {
    let root = repository_root();
    let mut offenders = Vec::new();
    let mut anchor_cache: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in &citing_sources() {
        for (index, line) in read(name).lines().enumerate() {
            for (path, anchor) in docs_citations(line) {
                let place = format!("{name}:{}", index + 1);
                if !root.join(&path).is_file() {
                    offenders.push(format!("{place}: no file {path}"));
                    continue;
                }
                let Some(anchor) = anchor.filter(|anchor| !anchor.is_empty()) else {
                    continue;
                };
                let anchors = anchor_cache
                    .entry(path.clone())
                    .or_insert_with(|| anchors_of(&read(&path)));
                if !anchors.contains(&anchor) {
                    offenders.push(format!("{place}: no heading #{anchor} in {path}"));
                }
            }
        }
    }
    fail_with("docs citations that do not resolve", &offenders);
}

// Proves the matchers find each kind of outside citation and nothing else. The samples are
// built from parts so that this file does not read as citing anything itself.
#[test]
fn the_citation_matchers_match_what_they_should() {
    let cite = |kind: &str, item: &str| format!("see ({kind} {item}).");
    assert_eq!(
        outside_citation(&cite("reference", "3.2")),
        Some("reference N.N")
    );
    assert_eq!(outside_citation(&cite("trap", "T9")), Some("trap TNN"));
    assert_eq!(outside_citation(&cite("STYLE", "B2")), Some("STYLE XN"));
    assert_eq!(outside_citation("a reference 3 times"), None);
    assert_eq!(outside_citation("by reference to it"), None);
    let cited = docs_citations("see docs/protocol.md#pull-message, and docs/map.md.");
    assert_eq!(
        cited,
        vec![
            (
                "docs/protocol.md".to_owned(),
                Some("pull-message".to_owned())
            ),
            ("docs/map.md".to_owned(), None),
        ]
    );
    assert_eq!(
        heading_anchor(" Group commit (SYNC_FLUSH)"),
        "group-commit-sync_flush"
    );
    let anchors = anchors_of("# A\n## B c\n```\n# not\n```\n## B c\n");
    assert!(anchors.contains("b-c") && anchors.contains("b-c-1") && !anchors.contains("not"));
}
