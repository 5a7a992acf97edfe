//! The crate's modules form layers: each module uses only modules below it in [`LAYERS`], so
//! the module graph has no cycle and the store reads top-down (see the crate docs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src/`, top to bottom (the same order as the crate docs and README).
const LAYERS: &[&str] = &[
    "lib",
    "store",
    "retention",
    "orphan",
    "maintenance",
    "replica",
    "read",
    "append",
    "flush",
    "warm",
    "recovery",
    "queue_repair",
    "shard",
    "flights",
    "queues",
    "index",
    "sealed_index",
    "index_entry",
    "consume_queue",
    "cq_cache",
    "checkpoint",
    "commit_log",
    "config",
    "remap",
    "queue_table",
    "error",
    "offset",
    "limits",
];

/// Source without comments (line comments, doc comments and block comments), so that doc
/// links to other modules do not count as uses. String literals are kept as they are: the
/// crate's strings hold no `//` or `crate::`.
fn strip_comments(source: &str) -> String {
    let mut code = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else {
            let next = rest.chars().next().expect("not empty");
            code.push(next);
            rest = &rest[next.len_utf8()..];
        }
    }
    code
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first path segment of each item of a `{a::b, c, d::{e, f}}` group (`text` starts after
/// the opening brace).
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_item_start = true;
    for (at, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if c.is_whitespace() => {}
            _ if at_item_start && depth == 0 => {
                heads.push(identifier(&text[at..]).to_string());
                at_item_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The first segment of every `crate::` path in `source`: a module of the crate, or an item
/// the crate root re-exports (which counts as a use of `lib`).
fn crate_references(source: &str) -> BTreeSet<String> {
    let code = strip_comments(source);
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let after = &code[at + "crate::".len()..];
        match after.strip_prefix('{') {
            Some(group) => found.extend(group_heads(group)),
            None => {
                found.insert(identifier(after).to_string());
            }
        }
    }
    found
}

/// Module name to the modules it uses, from `src/*.rs`.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = LAYERS.iter().map(|name| name.to_string()).collect();
    let mut graph = BTreeMap::new();
    for item in std::fs::read_dir(&src).expect("src is readable") {
        let path = item.expect("directory entry").path();
        assert!(
            path.extension().is_some_and(|ext| ext == "rs"),
            "{}: the check expects only flat .rs modules in src",
            path.display()
        );
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 name");
        let source = std::fs::read_to_string(&path).expect("source is readable");
        let uses = crate_references(&source)
            .into_iter()
            .map(|head| {
                if modules.contains(&head) {
                    head
                } else {
                    "lib".to_string()
                }
            })
            .filter(|used| used != name)
            .collect();
        graph.insert(name.to_string(), uses);
    }
    graph
}

/// A cycle of the graph as a path `a -> b -> ... -> a`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

// Proves the reference extraction sees grouped and nested `use crate::{..}` paths and ignores
// comments, so the layer check below cannot pass by missing a use.
#[test]
fn references_are_found_in_code_only() {
    let source = "//! see [`x`](crate::remap)\n\
        use crate::{error::StoreError, offset::{LogId, PhysicalOffset},\n    limits};\n\
        /* crate::store */ fn f() { crate::sync::now(); let _ = crate::Store::open; }\n";
    let found: Vec<String> = crate_references(source).into_iter().collect();
    assert_eq!(found, ["Store", "error", "limits", "offset", "sync"]);
}

// Proves every module uses only modules below it in LAYERS, and the module graph has no
// cycle; a new module must be placed in LAYERS (and the docs) before this passes.
#[test]
fn modules_use_only_lower_layers() {
    let graph = module_graph();
    let rank = |name: &str| LAYERS.iter().position(|layer| *layer == name);
    let mut problems = Vec::new();
    for (module, uses) in &graph {
        for used in uses {
            if rank(used) <= rank(module) {
                problems.push(format!("{module} uses {used}, which is not below it"));
            }
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        problems.push(format!("cycle: {}", cycle.join(" -> ")));
    }
    let declared: BTreeSet<&str> = LAYERS.iter().copied().collect();
    if declared.len() != LAYERS.len() {
        problems.push("LAYERS names a module twice".to_string());
    }
    let present: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    for missing in present.difference(&declared) {
        problems.push(format!("module {missing} is not in LAYERS"));
    }
    for gone in declared.difference(&present) {
        problems.push(format!("LAYERS names {gone}, which src/ does not hold"));
    }
    assert!(
        problems.is_empty(),
        "module layering broken:\n{}",
        problems.join("\n")
    );
}

/// The module names of the layer list under `heading` in `text`: lines `<prefix>`name`: ...`,
/// in order, up to the next line starting with `section_end`.
fn listed_layers(text: &str, heading: &str, prefix: &str, section_end: &str) -> Vec<String> {
    text.lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| !line.starts_with(section_end))
        .filter_map(|line| line.strip_prefix(prefix)?.strip_prefix('`'))
        .filter_map(|rest| Some(rest.split_once("`:")?.0.to_string()))
        .collect()
}

// Proves the layer lists a reader sees (crate docs, README) are the order checked above.
#[test]
fn docs_list_the_layers_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let without_lib: Vec<String> = LAYERS[1..].iter().map(|name| name.to_string()).collect();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs is readable");
    let in_lib = listed_layers(&lib, "//! # Layers", "//! - ", "//! #");
    assert_eq!(in_lib, without_lib, "src/lib.rs, # Layers");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README is readable");
    let in_readme = listed_layers(&readme, "## Layers", "- ", "## ");
    assert_eq!(in_readme, without_lib, "README.md, ## Layers");
}
