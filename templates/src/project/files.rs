//! Rendering template sets and writing what they render: atomically,
//! formatted by rustfmt, edits inserted at their markers.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::ScaffoldError;
use crate::names::snake_case;
use crate::render::Values;

/// Inserts `line` before the line holding `marker`, with its indentation.
pub(crate) fn insert_before_marker(text: &str, marker: &str, line: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + line.len() + 8);
    let mut found = false;
    for existing in text.split_inclusive('\n') {
        if !found && existing.trim() == marker {
            let indent: String = existing.chars().take_while(|c| c.is_whitespace()).collect();
            out.push_str(&indent);
            out.push_str(line);
            out.push('\n');
            found = true;
        }
        out.push_str(existing);
    }
    found.then_some(out)
}

/// Runs `rustfmt` on the `.rs` files among `files` (relative to `root`),
/// so the code is formatted whatever the length of the names filled in.
/// Without rustfmt installed the files stay as rendered (they are close to
/// formatted already).
pub(crate) fn format_rust<'a>(
    root: &Path,
    files: impl Iterator<Item = &'a str>,
) -> Result<(), ScaffoldError> {
    let rust: Vec<PathBuf> = files
        .filter(|path| path.ends_with(".rs"))
        .map(|path| root.join(path))
        .collect();
    if rust.is_empty() {
        return Ok(());
    }
    let rustfmt = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let output = match Command::new(rustfmt)
        .args(["--edition", "2024"])
        .args(&rust)
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ScaffoldError::Template {
                template: "rustfmt".to_owned(),
                detail: format!("cannot run rustfmt: {e}"),
            });
        }
    };
    if output.status.success() {
        Ok(())
    } else {
        Err(ScaffoldError::Template {
            template: "rustfmt".to_owned(),
            detail: format!(
                "rustfmt rejected the generated code (a bug in cargo-opkit): {}",
                String::from_utf8_lossy(&output.stderr)
            ),
        })
    }
}

/// The `.rs` files among `files` (relative to `root`) that rustfmt would
/// leave as they are now: those a scaffold may format again after adding
/// its lines. A file the user keeps in a style of their own is not
/// reformatted (only the scaffold's lines change in it). rustfmt checks
/// (and formats) a file with the modules it declares out of line, so a
/// file counts only when its whole module tree is formatted: formatting it
/// again then touches no other file. Without rustfmt, none.
pub(crate) fn already_formatted<'a>(
    root: &Path,
    files: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    let rustfmt = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    files
        .filter(|path| path.ends_with(".rs") && root.join(path).is_file())
        .filter(|path| {
            Command::new(&rustfmt)
                .args(["--edition", "2024", "--check"])
                .arg(root.join(path))
                .output()
                .is_ok_and(|output| output.status.success())
        })
        .collect()
}

pub(crate) fn kind_values(name: &str, group: &str, version: &str, kind: &str) -> Values {
    let mut values = Values::default();
    values
        .set("name", name)
        .set("crate_name", name.replace('-', "_"))
        .set("namespace", format!("{name}-system"))
        .set("group", group)
        .set("version", version)
        .set("kind", kind)
        .set("kind_snake", snake_case(kind))
        .set("kind_lower", kind.to_ascii_lowercase());
    values
}

pub(crate) fn render_set(
    set: &[(&str, &str)],
    values: &Values,
) -> Result<Vec<(String, String)>, ScaffoldError> {
    set.iter()
        .map(|(path, text)| {
            // A file without the `.tmpl` suffix is copied as it is (a
            // Grafana dashboard's `{{label}}` legends are not placeholders).
            let text = if path.ends_with(".tmpl") {
                values.render(path, text)?
            } else {
                (*text).to_owned()
            };
            Ok((values.output_path(path)?, text))
        })
        .collect()
}

pub(crate) fn read(path: &Path) -> Result<String, ScaffoldError> {
    std::fs::read_to_string(path).map_err(|source| ScaffoldError::Io {
        path: path.to_owned(),
        source,
    })
}

pub(super) fn write_tree(root: &Path, files: &[(String, String)]) -> Result<(), ScaffoldError> {
    for (relative, text) in files {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ScaffoldError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| ScaffoldError::Io { path, source })?;
    }
    Ok(())
}

/// Writes `text` to a temporary sibling, then renames it over `path`.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<(), ScaffoldError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ScaffoldError::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.opkit-tmp"));
    std::fs::write(&temporary, text).map_err(|source| ScaffoldError::Io {
        path: temporary.clone(),
        source,
    })?;
    std::fs::rename(&temporary, path).map_err(|source| ScaffoldError::Io {
        path: path.to_owned(),
        source,
    })
}
