//! No import cycles between the modules of any crate in the workspace.
//!
//! A module depends on another when its non-test code names a path into it
//! (`crate::a::b`, `super::a`, `self::a`, in a `use` or inline); paths
//! between a module and its own ancestors or descendants do not count (a
//! parent declares and re-exports its children). The graph is read from
//! the sources as text, so a path in a comment is left out but one in a
//! string would count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file under `root` defines (`a/b.rs` and `a/b/mod.rs` are
/// `a::b`; `lib.rs`, `main.rs` the crate root).
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).expect("file under root");
    let mut parts: Module = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comment lines and without its trailing
/// `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths `crate::...`, `super::...` and `self::...` in `code`: the
/// anchor and the identifiers after it.
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    for anchor in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(anchor).map(|i| i + from) {
            from = i + anchor.len();
            if i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':') {
                continue;
            }
            let mut parts = Vec::new();
            let mut j = from;
            while code[j..].starts_with("::") {
                let start = j + 2;
                let end = start + code[start..].bytes().take_while(|&b| ident(b)).count();
                if end == start {
                    break;
                }
                parts.push(code[start..end].to_string());
                j = end;
            }
            if !parts.is_empty() {
                out.push((anchor.to_string(), parts));
            }
        }
    }
    out
}

/// The modules of one crate's `src` and, per module, those it depends on.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, file) in &modules {
        let text = std::fs::read_to_string(file).expect("readable source");
        let deps = edges.entry(m.clone()).or_default();
        for (anchor, parts) in paths(&code(&text)) {
            let base: Module = match anchor.as_str() {
                "crate" => Vec::new(),
                "self" => m.clone(),
                _ => m[..m.len().saturating_sub(1)].to_vec(),
            };
            // the longest prefix of the path that names a module
            let target = (1..=parts.len()).rev().find_map(|k| {
                let mut t = base.clone();
                t.extend_from_slice(&parts[..k]);
                modules.contains_key(&t).then_some(t)
            });
            if let Some(t) = target {
                let related = t.starts_with(m) || m.starts_with(&t);
                if !related {
                    deps.insert(t);
                }
            }
        }
    }
    edges
}

/// A cycle of `edges`, if there is one.
fn find_cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    // 0 unvisited, 1 on the stack, 2 done
    fn visit(
        m: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(m.clone(), 1);
        stack.push(m.clone());
        for d in edges.get(m).into_iter().flatten() {
            match state.get(d).copied().unwrap_or(0) {
                1 => {
                    let i = stack.iter().position(|s| s == d).expect("on the stack");
                    return Some(stack[i..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(d, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_module_depends_on_itself_through_others() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for e in std::fs::read_dir(&crates).expect("crates dir").flatten() {
        let src = e.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let edges = graph(&src);
        checked += edges.len();
        if let Some(cycle) = find_cycle(&edges) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            panic!(
                "{}: import cycle {}",
                e.path().display(),
                names.join(" -> ")
            );
        }
    }
    assert!(checked > 50, "read only {checked} modules");
}

#[test]
fn the_checker_finds_a_cycle() {
    let a: Module = vec!["a".into()];
    let b: Module = vec!["b".into()];
    let mut edges = BTreeMap::new();
    edges.insert(a.clone(), BTreeSet::from([b.clone()]));
    edges.insert(b.clone(), BTreeSet::from([a.clone()]));
    assert!(find_cycle(&edges).is_some());
    edges.get_mut(&b).expect("b").clear();
    assert!(find_cycle(&edges).is_none());
    let p = paths("use crate::gemm::args::{x, y};\nlet v = super::layout::spec(1);");
    assert_eq!(
        p[0],
        ("crate".to_string(), vec!["gemm".into(), "args".into()])
    );
    assert_eq!(
        p[1],
        ("super".to_string(), vec!["layout".into(), "spec".into()])
    );
}
