//! The crate's modules form layers: each top-level module uses only modules below it in
//! [`LAYERS`], and no file of the crate takes part in an import cycle, so the broker reads
//! top-down (see the crate docs, `src/lib.rs`).
//!
//! A file is a node: `runtime` (`src/runtime.rs`), `processor` (`src/processor/mod.rs`),
//! `processor::admin` (`src/processor/admin.rs`). An edge is a path in code (comments do not
//! count) that names another node: `crate::x::y`, `super::y`, `self::y`, and in the binary
//! (`src/main.rs`) `comet_broker::x::y`. A path naming an item of a directory module's own
//! file (`super::error`) is an edge to that file. A directory module's edges to its own
//! children are not counted: declaring, re-exporting and dispatching to its parts is what a
//! `mod.rs` is for; everything else, siblings included, must be acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One layer: its name as the crate docs give it, and its top-level modules, top to bottom.
struct Layer {
    name: &'static str,
    modules: &'static [&'static str],
}

/// The layers, top to bottom, and in each its top-level modules top to bottom (the same order
/// as the crate docs). `lib` (the crate root) only declares modules, so it is above all.
const LAYERS: &[Layer] = &[
    Layer {
        name: "root",
        modules: &["lib"],
    },
    Layer {
        name: "Runtime",
        modules: &["main", "runtime", "register", "standalone"],
    },
    Layer {
        name: "Processors",
        modules: &["processor"],
    },
    Layer {
        name: "Features",
        modules: &["replication", "transaction", "timer_wheel", "delay_level"],
    },
    Layer {
        name: "Shard context",
        modules: &["routing", "reappend", "shard", "replication_state"],
    },
    Layer {
        name: "Tables",
        modules: &[
            "metadata",
            "clients",
            "lock",
            "subscription",
            "topic",
            "offset",
            "stats",
            "traffic",
            "live_config",
            "config",
            "acl",
            "namesrv_client",
            "ownership",
            "persist",
        ],
    },
];

/// Uses that still go upward, as (file, the file it uses). Each is a debt: the check fails
/// when one of them is gone, so the list can only shrink.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Every top-level module, top to bottom.
fn module_order() -> Vec<&'static str> {
    LAYERS
        .iter()
        .flat_map(|layer| layer.modules.iter().copied())
        .collect()
}

/// Source without comments (line comments, doc comments and block comments), so that doc
/// links to other modules do not count as uses. String literals are kept as they are: the
/// crate's strings hold no `crate::` path.
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

/// The first one or two segments of each item of a `{a::b, c, d::{e, f}}` group (`text`
/// starts after the opening brace).
fn group_items(text: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
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
                items.extend(path_heads(&text[at..]));
                at_item_start = false;
            }
            _ => {}
        }
    }
    items
}

/// The first one or two segments of the path at the start of `text` (`a`, `a::b`, and for
/// `a::{b, c}` both `a::b` and `a::c`).
fn path_heads(text: &str) -> Vec<Vec<String>> {
    let first = identifier(text);
    let rest = &text[first.len()..];
    let Some(rest) = rest.strip_prefix("::") else {
        return vec![vec![first.to_string()]];
    };
    if let Some(group) = rest.strip_prefix('{') {
        let seconds: Vec<Vec<String>> = group_items(group)
            .into_iter()
            .map(|item| vec![first.to_string(), item[0].clone()])
            .collect();
        if seconds.is_empty() {
            return vec![vec![first.to_string()]];
        }
        return seconds;
    }
    vec![vec![first.to_string(), identifier(rest).to_string()]]
}

/// The paths after every `prefix` (`crate::`, `super::`, ...) in `code`, as their first one
/// or two segments.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let after = &code[at + prefix.len()..];
        match after.strip_prefix('{') {
            Some(group) => found.extend(group_items(group)),
            None => found.extend(path_heads(after)),
        }
    }
    found
}

/// One source file of the crate: its module path and its code without comments.
struct SourceFile {
    module: Vec<String>,
    /// True for `mod.rs`, whose `super` is its directory's parent.
    is_directory_module: bool,
    code: String,
}

/// Every `.rs` file under `src/`, with its module path (`a/mod.rs` and `a.rs` are `a`).
fn source_files() -> Vec<SourceFile> {
    fn walk(dir: &Path, prefix: &[String], files: &mut Vec<SourceFile>) {
        for item in std::fs::read_dir(dir).expect("src is readable") {
            let path = item.expect("directory entry").path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("utf-8 name")
                .to_string();
            if path.is_dir() {
                let mut module = prefix.to_vec();
                module.push(name);
                walk(&path, &module, files);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("source is readable");
            let is_directory_module = name == "mod";
            let mut module = prefix.to_vec();
            if !is_directory_module {
                module.push(name);
            }
            files.push(SourceFile {
                module,
                is_directory_module,
                code: strip_comments(&source),
            });
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut files,
    );
    files
}

/// The node a path names: the longest of `base + segments` that is a file of the crate.
fn resolve(nodes: &BTreeSet<String>, base: &[String], segments: &[String]) -> Option<String> {
    for take in (0..=segments.len()).rev() {
        let mut path = base.to_vec();
        path.extend(segments[..take].iter().cloned());
        let name = if path.is_empty() {
            "lib".to_string()
        } else {
            path.join("::")
        };
        if nodes.contains(&name) {
            return Some(name);
        }
    }
    None
}

/// Node name to the nodes it uses.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = source_files();
    let node_of = |file: &SourceFile| {
        if file.module.is_empty() {
            "lib".to_string()
        } else {
            file.module.join("::")
        }
    };
    let nodes: BTreeSet<String> = files.iter().map(node_of).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let name = node_of(file);
        let own = &file.module;
        // `super` of `a/b.rs` (module `a::b`) is `a`, of `a/mod.rs` (module `a`) the crate
        // root. An inline `mod tests` is inside the file's module: its `super` is the file.
        let (body, tests) = match file.code.find("\nmod tests {") {
            Some(at) => file.code.split_at(at),
            None => (file.code.as_str(), ""),
        };
        let super_base: Vec<String> = own[..own.len().saturating_sub(1)].to_vec();
        let mut paths: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        let crate_prefix = if name == "main" {
            "comet_broker::"
        } else {
            "crate::"
        };
        for code in [body, tests] {
            for path in paths_after(code, crate_prefix) {
                paths.push((Vec::new(), path));
            }
        }
        for path in paths_after(body, "super::") {
            paths.push((super_base.clone(), path));
        }
        for path in paths_after(body, "self::") {
            paths.push((own.clone(), path));
        }
        for path in paths_after(tests, "super::") {
            paths.push((own.clone(), path));
        }
        let mut uses = BTreeSet::new();
        for (base, segments) in paths {
            let Some(used) = resolve(&nodes, &base, &segments) else {
                continue;
            };
            let child_of_own_directory =
                file.is_directory_module && used.strip_prefix(&format!("{name}::")).is_some();
            if used != name && !child_of_own_directory {
                uses.insert(used);
            }
        }
        graph.insert(name, uses);
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

fn top_level(node: &str) -> &str {
    node.split("::").next().expect("a node has a name")
}

// Proves the path extraction sees grouped and nested `use crate::{..}` paths, `super::`
// paths and ignores comments, so the layer check below cannot pass by missing a use.
#[test]
fn paths_are_found_in_code_only() {
    let source = "//! see [`x`](crate::shard)\n\
        use crate::{shard::ShardBroker, topic::{perm, TopicTable},\n    persist};\n\
        use super::admin::{a, b};\n\
        /* crate::metadata */ fn f() { crate::offset::OffsetTable::new(); }\n";
    let code = strip_comments(source);
    let crate_paths = paths_after(&code, "crate::");
    let expected: Vec<Vec<String>> = [
        &["shard", "ShardBroker"][..],
        &["topic", "perm"],
        &["topic", "TopicTable"],
        &["persist"],
        &["offset", "OffsetTable"],
    ]
    .iter()
    .map(|path| path.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(crate_paths, expected);
    let super_paths = paths_after(&code, "super::");
    assert_eq!(super_paths, [["admin", "a"], ["admin", "b"]]);
}

// Proves a cycle is reported, so the check below fails on one.
#[test]
fn cycles_are_found() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", &["b"][..]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]
            .iter()
            .map(|(node, uses)| {
                (
                    node.to_string(),
                    uses.iter().map(|used| used.to_string()).collect(),
                )
            })
            .collect();
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}

// Proves every top-level module uses only modules below it in LAYERS, and no file of the
// crate is in an import cycle; a new module must be placed in LAYERS (and the docs) first.
#[test]
fn modules_use_only_lower_layers() {
    let mut graph = module_graph();
    let order = module_order();
    let rank = |name: &str| order.iter().position(|module| *module == top_level(name));
    let mut problems = Vec::new();
    for (module, used) in KNOWN_UPWARD {
        let known = graph
            .get_mut(*module)
            .is_some_and(|uses| uses.remove(*used));
        if !known {
            problems.push(format!(
                "{module} no longer uses {used}: drop it from KNOWN_UPWARD"
            ));
        }
    }
    for (module, uses) in &graph {
        for used in uses {
            let same_module = top_level(used) == top_level(module);
            if !same_module && rank(used) <= rank(module) {
                problems.push(format!("{module} uses {used}, which is not below it"));
            }
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        problems.push(format!("cycle: {}", cycle.join(" -> ")));
    }
    let declared: BTreeSet<&str> = order.iter().copied().collect();
    if declared.len() != order.len() {
        problems.push("LAYERS names a module twice".to_string());
    }
    let present: BTreeSet<&str> = graph.keys().map(|node| top_level(node)).collect();
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

// Proves the layer list a reader sees (the crate docs) is the order checked above: under
// `# Layers`, a line `<Layer name>:` opens each layer and `- `module`: its job` lines follow.
#[test]
fn docs_list_the_layers_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs is readable");
    let mut listed: Vec<(String, Vec<String>)> = Vec::new();
    for line in lib
        .lines()
        .skip_while(|line| *line != "//! # Layers")
        .skip(1)
        .take_while(|line| !line.starts_with("//! #"))
    {
        let Some(text) = line.strip_prefix("//! ") else {
            continue;
        };
        if let Some(module) = text
            .strip_prefix("- `")
            .and_then(|rest| Some(rest.split_once("`:")?.0))
        {
            let layer = listed
                .last_mut()
                .expect("a module line follows a layer line");
            layer.1.push(module.to_string());
        } else if let Some(name) = text.strip_suffix(':') {
            listed.push((name.to_string(), Vec::new()));
        }
    }
    let expected: Vec<(String, Vec<String>)> = LAYERS[1..]
        .iter()
        .map(|layer| {
            let modules = layer.modules.iter().map(|m| m.to_string()).collect();
            (layer.name.to_string(), modules)
        })
        .collect();
    assert_eq!(listed, expected, "src/lib.rs, # Layers");
}
