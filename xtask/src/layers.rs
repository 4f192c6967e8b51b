//! `cargo xtask layers` (part of `test`): lock-core's two layers stay apart.
//!
//! Reads the `crate::` paths of every module of `lock-core/src` (comments
//! and `#[cfg(test)]` modules left out) and fails if a module of the lease
//! engine (`engine/`) names the Redis layer, the config that joins the two,
//! the strategy module or a client crate, or if any modules import each other
//! in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Modules the engine may not name: everything that knows Redis.
const ABOVE_OR_BESIDE_THE_ENGINE: [&str; 3] = ["server", "config", "strategy"];

/// Crates the engine may not name.
const CLIENT_CRATES: [&str; 2] = ["redis", "fred"];

/// Checks the crate whose `src` folder is `src`.
pub fn check(src: &Path) -> Result<(), String> {
    let modules = read_modules(src)?;
    let problems = problems(&modules);
    if problems.is_empty() {
        println!(
            "layers: {} modules, the engine names no Redis layer, no cycle",
            modules.len()
        );
        Ok(())
    } else {
        Err(format!("lock-core's layers:\n  {}", problems.join("\n  ")))
    }
}

/// One module: its path (`engine::manager`) and its source.
type Modules = BTreeMap<String, String>;

fn read_modules(src: &Path) -> Result<Modules, String> {
    let mut modules = Modules::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = fs::read_dir(&folder)
            .map_err(|err| format!("cannot read {}: {err}", folder.display()))?;
        for entry in entries {
            let path = entry.map_err(|err| err.to_string())?.path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).map_err(|err| err.to_string())?;
            let mut parts: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let text = fs::read_to_string(&path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            modules.insert(parts.join("::"), text);
        }
    }
    Ok(modules)
}

/// What is wrong with `modules`, one line each.
fn problems(modules: &Modules) -> Vec<String> {
    let exports = root_exports(modules.get("").map_or("", String::as_str));
    let mut graph: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (module, text) in modules {
        if module.is_empty() {
            // The crate root only re-exports.
            continue;
        }
        let code = code_of(text);
        let mut targets = BTreeSet::new();
        for path in crate_paths(&code, module) {
            if let Some(target) = resolve(&path, modules, &exports) {
                if target != *module && !target.starts_with(&format!("{module}::")) {
                    targets.insert(target);
                }
            }
        }
        if module == "engine" || module.starts_with("engine::") {
            for target in &targets {
                let top = target.split("::").next().unwrap_or_default();
                if ABOVE_OR_BESIDE_THE_ENGINE.contains(&top) {
                    problems.push(format!("the engine module `{module}` names `{target}`"));
                }
            }
            for client in CLIENT_CRATES {
                if names_crate(&code, client) {
                    problems.push(format!(
                        "the engine module `{module}` names the `{client}` crate"
                    ));
                }
            }
        }
        graph.insert(module, targets);
    }
    problems.extend(
        cycles(&graph)
            .into_iter()
            .map(|cycle| format!("modules import each other: {}", cycle.join(" -> "))),
    );
    problems
}

/// `text` without comments, string contents or `#[cfg(test)]` modules.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            // A test module runs to the end of its file, by this crate's habit.
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line.split(" //").next().unwrap_or(line));
        code.push('\n');
    }
    code
}

/// The `crate::` paths `code` names, with `super::` and `self::` made
/// absolute from `module`, each as its segments; grouped imports
/// (`crate::a::{b, c::d}`) give one path per member.
fn crate_paths(code: &str, module: &str) -> Vec<Vec<String>> {
    let own: Vec<&str> = module.split("::").collect();
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let start = ["crate::", "super::", "self::"]
            .iter()
            .find(|prefix| rest.starts_with(**prefix))
            .filter(|_| at == 0 || !is_ident(bytes[at - 1]) && bytes[at - 1] != b':');
        let Some(prefix) = start else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let base: Vec<String> = match *prefix {
            "crate::" => Vec::new(),
            // A file's `super` is its parent module; `self` is itself.
            "super::" => own[..own.len().saturating_sub(1)]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            _ => own.iter().map(|s| s.to_string()).collect(),
        };
        at += prefix.len();
        let (found, used) = path_tail(&code[at..]);
        at += used;
        for tail in found {
            let mut path = base.clone();
            path.extend(tail);
            paths.push(path);
        }
    }
    paths
}

/// The segments after a `crate::`, expanding one level of `{...}`; and how
/// many bytes they took.
fn path_tail(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let ident: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            at += ident.len();
            segments.push(ident);
            if text[at..].starts_with("::") {
                at += 2;
                continue;
            }
            return (vec![segments], at);
        }
        if text[at..].starts_with('{') {
            let end = text[at..].find('}').map_or(text.len(), |end| at + end);
            let group = &text[at + 1..end];
            let members = group
                .split(',')
                .map(|member| {
                    let mut path = segments.clone();
                    path.extend(
                        member
                            .trim()
                            .split("::")
                            .map(|part| part.trim().trim_matches('{').to_owned())
                            .filter(|part| !part.is_empty()),
                    );
                    path
                })
                .collect();
            return (members, end.min(text.len()));
        }
        return (vec![segments], at);
    }
}

/// The module a path lands in: its longest prefix that is a module, or,
/// for an item of the crate root, the module the root re-exports it from.
fn resolve(
    path: &[String],
    modules: &Modules,
    exports: &BTreeMap<String, String>,
) -> Option<String> {
    for len in (1..=path.len()).rev() {
        let candidate = path[..len].join("::");
        if modules.contains_key(&candidate) {
            return Some(candidate);
        }
    }
    path.first().and_then(|name| exports.get(name)).cloned()
}

/// What the crate root re-exports: item name to the module it comes from.
fn root_exports(root: &str) -> BTreeMap<String, String> {
    let code = code_of(root);
    let mut exports = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(used) = statement
            .lines()
            .filter(|line| !line.trim_start().starts_with("#["))
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
            .strip_prefix("pub use ")
            .map(str::to_owned)
        else {
            continue;
        };
        let (found, _) = path_tail(&used);
        for path in found {
            if let Some((name, module)) = path.split_last() {
                exports.insert(name.clone(), module.join("::"));
            }
        }
    }
    exports
}

/// Whether `code` names the crate `name` as a path's first segment.
fn names_crate(code: &str, name: &str) -> bool {
    let pattern = format!("{name}::");
    code.match_indices(&pattern).any(|(at, _)| {
        let before = code[..at].bytes().next_back();
        !before.is_some_and(|byte| is_ident(byte) || byte == b':')
    })
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Every circle of imports in `graph`, each once, as the modules in order
/// with the first repeated at the end.
fn cycles(graph: &BTreeMap<&str, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((module, path)) = stack.pop() {
            for next in graph.get(module.as_str()).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    // The same circle from another start is the same circle.
                    let least = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, m)| m.as_str())
                        .map_or(0, |(i, _)| i);
                    cycle.rotate_left(least);
                    let first = cycle[0].clone();
                    cycle.push(first);
                    found.insert(cycle);
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(files: &[(&str, &str)]) -> Modules {
        files
            .iter()
            .map(|(m, t)| (m.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn an_engine_module_that_names_the_redis_layer_is_reported() {
        let found = problems(&modules(&[
            ("", "pub use server::client::NodeClient;\n"),
            ("engine", ""),
            (
                "engine::manager",
                "use crate::engine::guard::LockGuard;\nuse crate::NodeClient;\n",
            ),
            ("engine::guard", ""),
            ("server", ""),
            ("server::client", "use crate::engine::guard::LockGuard;\n"),
        ]));
        assert_eq!(
            found,
            ["the engine module `engine::manager` names `server::client`"],
            "{found:?}"
        );
    }

    #[test]
    fn a_client_crate_in_the_engine_is_reported_but_not_in_a_comment() {
        let found = problems(&modules(&[(
            "engine::a",
            "// redis::Client is not named here\nfn f() { fred::prelude::x(); }\n",
        )]));
        assert_eq!(
            found,
            ["the engine module `engine::a` names the `fred` crate"]
        );
    }

    #[test]
    fn a_cycle_is_reported_once_and_test_modules_are_left_out() {
        let found = problems(&modules(&[
            ("a", "use crate::b::{X, c::Y};\n"),
            ("b", "use super::c;\n"),
            (
                "c",
                "use crate::{a::Z};\n#[cfg(test)]\nmod tests {\n use crate::b::X;\n}\n",
            ),
            (
                "d",
                "use crate::a;\n#[cfg(test)]\nmod tests {\n use crate::d;\n}\n",
            ),
        ]));
        assert_eq!(
            found,
            ["modules import each other: a -> b -> c -> a"],
            "{found:?}"
        );
    }

    #[test]
    fn lock_core_keeps_its_layers() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lock-core/src");
        check(&src).expect("lock-core's layers");
    }
}
