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
//!
//! Reading the files, finding paths and checking the graph is `comet_test_support::layers`;
//! the layers and the rules above are this crate's.

use std::collections::BTreeSet;
use std::path::Path;

use comet_test_support::layers::{
    layering_problems, listed_layers, paths_after, source_files, Graph, SourceFile,
};

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
        modules: &[
            "main",
            "controller_mode",
            "runtime",
            "register",
            "standalone",
            "metrics_server",
            "metrics_collect",
            "start_progress",
        ],
    },
    Layer {
        name: "Processors",
        modules: &["processor"],
    },
    Layer {
        name: "Features",
        modules: &[
            "replication",
            "transaction",
            "timer_wheel",
            "delay_level",
            "pop",
        ],
    },
    Layer {
        name: "Shard context",
        modules: &[
            "routing",
            "reappend",
            "queue_cursor",
            "selected_read",
            "memory",
            "shard",
            "controller_role",
            "replication_state",
        ],
    },
    Layer {
        name: "Tables",
        modules: &[
            "metrics",
            "metadata",
            "assignment",
            "clients",
            "lock",
            "subscription",
            "topic",
            "topic_attributes",
            "offset",
            "stats",
            "traffic",
            "namesrv_client",
            "live_config",
            "config",
            "acl",
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
fn module_graph() -> Graph {
    let files = source_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let nodes: BTreeSet<String> = files.iter().map(SourceFile::node).collect();
    let mut graph = Graph::new();
    for file in &files {
        let name = file.node();
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

// Proves every top-level module uses only modules below it in LAYERS, and no file of the
// crate is in an import cycle; a new module must be placed in LAYERS (and the docs) first.
#[test]
fn modules_use_only_lower_layers() {
    let problems = layering_problems(module_graph(), &module_order(), KNOWN_UPWARD);
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
    let listed = listed_layers(&lib, "//! # Layers", "//! ", "//! #");
    let expected: Vec<(String, Vec<String>)> = LAYERS[1..]
        .iter()
        .map(|layer| {
            let modules = layer.modules.iter().map(|m| m.to_string()).collect();
            (layer.name.to_string(), modules)
        })
        .collect();
    assert_eq!(listed, expected, "src/lib.rs, # Layers");
}
