//! The crate's modules form layers: each module uses only modules below it in [`LAYERS`], so
//! the module graph has no cycle and the store reads top-down (see the crate docs).

//!
//! Reading the files, finding paths and checking the graph is `comet_test_support::layers`;
//! the order is this crate's.

use std::collections::BTreeSet;
use std::path::Path;

use comet_test_support::layers::{
    layering_problems, listed_layers, paths_after, source_files, Graph,
};

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
    "cq_files",
    "queues",
    "index",
    "sealed_index",
    "index_entry",
    "consume_queue",
    "cq_cache",
    "checkpoint",
    "commit_log",
    "read_windows",
    "config",
    "remap",
    "queue_table",
    "error",
    "offset",
    "recovery_progress",
    "histogram",
    "limits",
];

/// Module name to the modules it uses, from `src/*.rs`: the first segment of every `crate::`
/// path, a module of the crate or else an item the crate root re-exports (a use of `lib`).
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = LAYERS.iter().map(|name| name.to_string()).collect();
    let mut graph = Graph::new();
    for file in source_files(&src) {
        let name = file.node();
        assert!(
            file.module.len() == 1 && !file.is_directory_module,
            "{name}: the check expects only flat .rs modules in src"
        );
        let uses = paths_after(&file.code, "crate::")
            .into_iter()
            .map(|path| {
                if modules.contains(&path[0]) {
                    path[0].clone()
                } else {
                    "lib".to_string()
                }
            })
            .filter(|used| *used != name)
            .collect();
        graph.insert(name, uses);
    }
    graph
}

// Proves every module uses only modules below it in LAYERS, and the module graph has no
// cycle; a new module must be placed in LAYERS (and the docs) before this passes.
#[test]
fn modules_use_only_lower_layers() {
    let problems = layering_problems(module_graph(), LAYERS, &[]);
    assert!(
        problems.is_empty(),
        "module layering broken:\n{}",
        problems.join("\n")
    );
}

/// The module names of the layer list under `heading` in `text`, in order (the store's list
/// has no named groups).
fn listed_modules(text: &str, heading: &str, line_prefix: &str, section_end: &str) -> Vec<String> {
    listed_layers(text, heading, line_prefix, section_end)
        .into_iter()
        .flat_map(|(_, modules)| modules)
        .collect()
}

// Proves the layer lists a reader sees (crate docs, README) are the order checked above.
#[test]
fn docs_list_the_layers_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let without_lib: Vec<String> = LAYERS[1..].iter().map(|name| name.to_string()).collect();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs is readable");
    let in_lib = listed_modules(&lib, "//! # Layers", "//! ", "//! #");
    assert_eq!(in_lib, without_lib, "src/lib.rs, # Layers");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README is readable");
    let in_readme = listed_modules(&readme, "## Layers", "", "## ");
    assert_eq!(in_readme, without_lib, "README.md, ## Layers");
}
