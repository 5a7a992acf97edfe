//! The layer-order check of a crate's modules, shared by the crates that declare one (the
//! broker, the store): read the crate's `src/` files, find the crate paths each one names in
//! code (comments do not count, grouped imports do), build the module graph, and report every
//! use that is not of a lower layer, every import cycle, and a docs list that differs from
//! the declared order. Each crate's test keeps its own order and its own rules (which paths
//! make an edge, which edges are exempt).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module graph: node name to the nodes it uses.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Source without comments (line comments, doc comments and block comments), so that doc
/// links to other modules do not count as uses. String literals are kept as they are: the
/// crates' strings hold no crate path.
pub fn strip_comments(source: &str) -> String {
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
/// or two segments; a `prefix::{..}` group gives one path per item.
pub fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
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

/// One source file of a crate: its module path and its code without comments.
pub struct SourceFile {
    /// The module path: `a/b.rs` is `[a, b]`, `a/mod.rs` and `a.rs` are `[a]`, `lib.rs` is
    /// `[lib]`.
    pub module: Vec<String>,
    /// True for `mod.rs`, whose `super` is its directory's parent.
    pub is_directory_module: bool,
    /// The source without comments ([`strip_comments`]).
    pub code: String,
}

impl SourceFile {
    /// The file's node name in a graph: its module path joined by `::` (`lib` for the root).
    pub fn node(&self) -> String {
        if self.module.is_empty() {
            "lib".to_string()
        } else {
            self.module.join("::")
        }
    }
}

/// Every `.rs` file under `src` (a crate's `src/` directory), in no particular order.
pub fn source_files(src: &Path) -> Vec<SourceFile> {
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
    walk(src, &[], &mut files);
    files
}

/// A cycle of the graph as a path `a -> b -> ... -> a`, if there is one.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
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

/// The top-level module of a node (`processor` of `processor::admin`).
pub fn top_level(node: &str) -> &str {
    node.split("::").next().expect("a node has a name")
}

/// Everything wrong with `graph` against `order` (every top-level module, top to bottom): a
/// node using a node of another top-level module that is not below it, a cycle, a module
/// declared twice, missing from `order` or named there but absent. `known_upward` lists
/// (node, used node) edges still allowed upward; one that is gone is a problem too, so the
/// list can only shrink.
pub fn layering_problems(
    mut graph: Graph,
    order: &[&str],
    known_upward: &[(&str, &str)],
) -> Vec<String> {
    let rank = |name: &str| order.iter().position(|module| *module == top_level(name));
    let mut problems = Vec::new();
    for (module, used) in known_upward {
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
        problems.push("the layer order names a module twice".to_string());
    }
    let present: BTreeSet<&str> = graph.keys().map(|node| top_level(node)).collect();
    for missing in present.difference(&declared) {
        problems.push(format!("module {missing} is not in the layer order"));
    }
    for gone in declared.difference(&present) {
        problems.push(format!(
            "the layer order names {gone}, which src/ does not hold"
        ));
    }
    problems
}

/// The layer list under the line `heading` of `text`, up to the next line starting with
/// `section_end`: of each line that starts with `line_prefix` (`//! ` in crate docs, empty in
/// Markdown), a line ``- `name`: its job`` lists a module, and a line ending in `:` opens a
/// named group. Modules before the first group line fall in a group named "".
pub fn listed_layers(
    text: &str,
    heading: &str,
    line_prefix: &str,
    section_end: &str,
) -> Vec<(String, Vec<String>)> {
    let mut listed: Vec<(String, Vec<String>)> = Vec::new();
    for line in text
        .lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| !line.starts_with(section_end))
    {
        let Some(text) = line.strip_prefix(line_prefix) else {
            continue;
        };
        if let Some(module) = text
            .strip_prefix("- `")
            .and_then(|rest| Some(rest.split_once("`:")?.0))
        {
            if listed.is_empty() {
                listed.push((String::new(), Vec::new()));
            }
            let group = listed.last_mut().expect("a group was just opened");
            group.1.push(module.to_string());
        } else if let Some(name) = text.strip_suffix(':') {
            listed.push((name.to_string(), Vec::new()));
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(node, uses)| {
                let uses = uses.iter().map(|used| used.to_string()).collect();
                (node.to_string(), uses)
            })
            .collect()
    }

    // Proves the path extraction sees grouped and nested `use crate::{..}` paths, `super::`
    // paths and ignores comments, so a layer check cannot pass by missing a use.
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

    // Proves a cycle is reported.
    #[test]
    fn cycles_are_found() {
        let cyclic = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]);
        assert_eq!(find_cycle(&cyclic).unwrap(), ["a", "b", "c", "a"]);
    }

    // Proves an upward use, an undeclared module, a vanished known exception and a stale
    // order are each reported, and a downward graph passes.
    #[test]
    fn upward_uses_are_problems() {
        let order = ["top", "middle", "bottom"];
        let downward = graph(&[
            ("top", &["middle"]),
            ("middle", &["bottom"]),
            ("bottom", &[]),
        ]);
        assert!(layering_problems(downward.clone(), &order, &[]).is_empty());
        let upward = graph(&[("top", &[]), ("middle", &["top"]), ("bottom", &[])]);
        let problems = layering_problems(upward.clone(), &order, &[]);
        assert_eq!(problems, ["middle uses top, which is not below it"]);
        assert!(layering_problems(upward, &order, &[("middle", "top")]).is_empty());
        let problems = layering_problems(downward, &order[..2], &[("top", "bottom")]);
        let expected = [
            "top no longer uses bottom: drop it from KNOWN_UPWARD",
            "middle uses bottom, which is not below it",
            "module bottom is not in the layer order",
        ];
        assert_eq!(problems, expected);
    }

    // Proves a docs list is read by group, skipping prose, up to the section's end.
    #[test]
    fn docs_lists_are_read() {
        let text = "//! # Layers\n//!\n//! Prose.\n//! Top:\n//! - `a`: job\n//!   more.\n\
                    //! Bottom:\n//! - `b`: job\n//! # Next\n//! - `c`: not a layer\n";
        let listed = listed_layers(text, "//! # Layers", "//! ", "//! #");
        let expected = [
            ("Top".to_string(), vec!["a".to_string()]),
            ("Bottom".to_string(), vec!["b".to_string()]),
        ];
        assert_eq!(listed, expected);
    }
}
