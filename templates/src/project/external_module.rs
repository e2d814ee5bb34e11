//! The module chain of an external type's path (`crate::external::widget::Widget`):
//! `create api` declares the modules the path needs (`pub mod external;`
//! in `src/lib.rs`, `pub mod widget;` in `src/external/mod.rs`) so that a
//! file kopium wrote compiles, and refuses, before changing anything, a
//! path whose file does not exist.

use std::path::Path;

use crate::error::ScaffoldError;

/// Files as (path relative to the project, text).
type Files = Vec<(String, String)>;

/// What declaring `path`'s modules adds (new `mod.rs` files) and changes
/// (files that gain a `mod` line) in the project at `dir`, whose files'
/// current texts `read` gives (`None`: no such file). A path
/// outside the crate (`some_crate::v1::Kind`) needs nothing. The module
/// holding the type is declared with `#[rustfmt::skip]`: generated code
/// (kopium's) stays as written and `cargo fmt --check` passes.
pub(super) fn plan_modules(
    dir: &Path,
    path: &str,
    read: impl Fn(&str) -> Result<Option<String>, ScaffoldError>,
) -> Result<(Files, Files), ScaffoldError> {
    let Some(inner) = path.strip_prefix("crate::") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut modules: Vec<&str> = inner.split("::").collect();
    modules.pop(); // the type
    if modules.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    module_file(dir, &modules).ok_or_else(|| ScaffoldError::Flags {
        reason: format!(
            "--external-api-path {path}: no src/{}.rs (or src/{}/mod.rs) holds the type; \
             generate it first, e.g. `kopium --auto -f <crd>.yaml > src/{}.rs` \
             (see the book's \"Kinds you don't own\"), then run `create api` again",
            modules.join("/"),
            modules.join("/"),
            modules.join("/"),
        ),
    })?;
    let mut created = Vec::new();
    let mut edited = Vec::new();
    for depth in 0..modules.len() {
        let child = modules[depth];
        let parent = &modules[..depth];
        let leaf = depth + 1 == modules.len();
        let parent_file = match module_file(dir, parent) {
            Some(existing) => existing,
            None => format!("src/{}/mod.rs", parent.join("/")),
        };
        let text = match created.iter().find(|(file, _)| *file == parent_file) {
            Some((_, text)) => Some(String::clone(text)),
            None => read(&parent_file)?,
        };
        if text.as_deref().is_some_and(|t| declares(t, child)) {
            continue;
        }
        let declaration = if leaf {
            format!("#[rustfmt::skip] // generated code, kept as written\npub mod {child};\n")
        } else {
            format!("pub mod {child};\n")
        };
        match text {
            Some(text) => {
                let text = after_last_module(&text, &declaration);
                match created.iter_mut().find(|(file, _)| *file == parent_file) {
                    Some(slot) => slot.1 = text,
                    None => edited.push((parent_file, text)),
                }
            }
            None => created.push((
                parent_file,
                format!(
                    "//! Types of kinds this operator does not define (generated, e.g. by kopium).\n\n{declaration}"
                ),
            )),
        }
    }
    Ok((created, edited))
}

/// `text` with `declaration` after its last out-of-line `mod` line (at the
/// end when it has none).
fn after_last_module(text: &str, declaration: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let last = lines
        .iter()
        .rposition(|line| declared_module(line).is_some_and(|(_, out_of_line)| out_of_line));
    let at = last.map_or(lines.len(), |i| i + 1);
    let mut out = String::with_capacity(text.len() + declaration.len() + 1);
    for line in &lines[..at] {
        out.push_str(line);
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(declaration);
    for line in &lines[at..] {
        out.push_str(line);
    }
    out
}

/// The file of module `modules` under `src/` (`[]` is `src/lib.rs`), if
/// it exists: `src/a/b.rs` or `src/a/b/mod.rs`.
fn module_file(dir: &Path, modules: &[&str]) -> Option<String> {
    if modules.is_empty() {
        return Some("src/lib.rs".to_owned());
    }
    let stem = modules.join("/");
    [format!("src/{stem}.rs"), format!("src/{stem}/mod.rs")]
        .into_iter()
        .find(|candidate| dir.join(candidate).is_file())
}

/// Whether `text` declares module `name` (`mod name;`, `pub mod name;`,
/// `pub(crate) mod name {`, ..).
fn declares(text: &str, name: &str) -> bool {
    text.lines()
        .any(|line| declared_module(line).is_some_and(|(declared, _)| declared == name))
}

/// The module `line` declares and whether out of line (`mod a;`: true,
/// `mod a {`: false), for `mod`, `pub mod` and `pub(crate) mod`.
fn declared_module(line: &str) -> Option<(&str, bool)> {
    let line = line.trim();
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let rest = rest.strip_prefix("mod ")?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let (name, tail) = rest.split_at(end);
    match tail.trim_start().chars().next()? {
        ';' => Some((name, true)),
        '{' => Some((name, false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_disk(dir: &Path) -> impl Fn(&str) -> Result<Option<String>, ScaffoldError> + '_ {
        move |file| Ok(std::fs::read_to_string(dir.join(file)).ok())
    }

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_kopium_file_gets_its_modules_declared() {
        let dir = project(&[
            ("src/lib.rs", "pub mod api;\n\nfn main() {}\n"),
            ("src/external/monitor.rs", "pub struct Monitor;\n"),
        ]);
        let (created, edited) = plan_modules(
            dir.path(),
            "crate::external::monitor::Monitor",
            from_disk(dir.path()),
        )
        .unwrap();
        assert_eq!(
            edited,
            [(
                "src/lib.rs".to_owned(),
                "pub mod api;\npub mod external;\n\nfn main() {}\n".to_owned()
            )]
        );
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].0, "src/external/mod.rs");
        assert!(
            created[0].1.contains("#[rustfmt::skip]"),
            "{}",
            created[0].1
        );
        assert!(
            created[0].1.contains("pub mod monitor;"),
            "{}",
            created[0].1
        );
    }

    #[test]
    fn declared_modules_are_left_alone() {
        let dir = project(&[
            ("src/lib.rs", "pub mod api;\npub mod external;\n"),
            ("src/external/mod.rs", "pub mod monitor;\n"),
            ("src/external/monitor.rs", "pub struct Monitor;\n"),
        ]);
        let (created, edited) = plan_modules(
            dir.path(),
            "crate::external::monitor::Monitor",
            from_disk(dir.path()),
        )
        .unwrap();
        assert!(created.is_empty() && edited.is_empty());
        assert!(declares("pub(crate) mod external { }", "external"));
        assert!(!declares("pub mod externals;", "external"));
    }

    #[test]
    fn a_missing_file_is_refused_with_what_to_run() {
        let dir = project(&[("src/lib.rs", "pub mod api;\n")]);
        let err = plan_modules(
            dir.path(),
            "crate::external::monitor::Monitor",
            from_disk(dir.path()),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("src/external/monitor.rs"), "{text}");
        assert!(text.contains("kopium --auto"), "{text}");
        let (created, edited) = plan_modules(
            dir.path(),
            "other_crate::v1::Monitor",
            from_disk(dir.path()),
        )
        .unwrap();
        assert!(created.is_empty() && edited.is_empty());
    }
}
