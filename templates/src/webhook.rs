//! `cargo opkit create webhook`: a validating and defaulting webhook for
//! one kind of the project, served by the manager, with its manifests and
//! an envtest test.

use std::path::PathBuf;

use crate::Error;
use crate::names::snake_case;
use crate::project::{
    ProjectFile, insert_before_marker, kind_values, read, render_set, write_atomically,
};
use crate::templates;

/// The generated module holding every webhook of the project.
const MODULE: &str = "src/webhooks/mod.rs";

/// `cargo opkit create webhook`: adds `src/webhooks/<kind>.rs` (a
/// `Validator` and a `Defaulter` to fill in), registers it in
/// `src/webhooks/mod.rs` (created with the first webhook, with the
/// Service and webhook configurations `cargo opkit manifests` writes to
/// `deploy/05-webhooks.yaml`), has the manager serve the webhooks, and
/// adds `tests/<kind>_webhook.rs`.
#[derive(Debug, Clone)]
pub struct CreateWebhook {
    /// The project's directory.
    pub dir: PathBuf,
    /// The kind (one of the project's).
    pub kind: String,
}

/// A line to insert before or after an anchor line of a file.
struct Edit {
    file: &'static str,
    anchor: &'static str,
    line: String,
    after: bool,
}

impl CreateWebhook {
    /// Validates, then writes; every check runs before the first write.
    /// Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, Error> {
        let root = super::project::find_project(&self.dir)?;
        let project = ProjectFile::read(&root)?;
        if !project.kinds.iter().any(|k| k == &self.kind) {
            return Err(Error::InvalidKind {
                kind: self.kind.clone(),
                reason: format!(
                    "the project has no such kind (it has: {}); add it first with `cargo opkit create api --kind {}`",
                    project.kinds.join(", "),
                    self.kind
                ),
            });
        }
        let api_file = self
            .dir
            .join("src/api")
            .join(format!("{}.rs", snake_case(&self.kind)));
        let version = read(&api_file)?
            .lines()
            .find_map(|l| {
                let rest = l.trim().strip_prefix("version = \"")?;
                rest.split('"').next().map(str::to_owned)
            })
            .unwrap_or_else(|| project.version.clone());
        let values = kind_values(&project.name, &project.group, &version, &self.kind);
        let rendered = render_set(templates::WEBHOOK, &values)?;
        let first = !root.join(MODULE).exists();
        let snake = snake_case(&self.kind);
        let crate_name = project.name.replace('-', "_");

        let mut files: Vec<(String, String)> = Vec::new();
        for (path, text) in rendered {
            if path == MODULE && !first {
                continue;
            }
            let target = root.join(&path);
            if target.exists() {
                return Err(Error::Exists { path: target });
            }
            files.push((path, text));
        }

        let mut edits = Vec::new();
        if first {
            edits.push(Edit {
                file: "src/lib.rs",
                anchor: "pub mod controllers;",
                line: "pub mod webhooks;".to_owned(),
                after: true,
            });
            edits.push(Edit {
                file: "src/lib.rs",
                anchor: "(\"03-rbac.yaml\", format!(\"{HEADER}{rbac}\")),",
                line: "(\n    \"05-webhooks.yaml\",\n    format!(\"{HEADER}{}\", webhooks::manifest()?),\n),"
                    .to_owned(),
                after: true,
            });
            edits.push(Edit {
                file: "src/main.rs",
                anchor: "let mut manager = builder.build().await?;",
                line: format!(
                    "let builder = builder.webhook_server({crate_name}::webhooks::server());"
                ),
                after: false,
            });
        } else {
            edits.push(Edit {
                file: MODULE,
                anchor: "// opkit:scaffold:webhook-modules",
                line: format!("pub mod {snake};"),
                after: false,
            });
            edits.push(Edit {
                file: MODULE,
                anchor: "// opkit:scaffold:webhooks",
                line: format!("let webhooks = {snake}::register(webhooks);"),
                after: false,
            });
        }

        let mut edited: Vec<(String, String)> = Vec::new();
        for edit in edits {
            let text = match edited.iter().position(|(f, _)| f == edit.file) {
                Some(i) => edited.remove(i).1,
                None => read(&root.join(edit.file))?,
            };
            let changed = if edit.after {
                insert_after_line(&text, edit.anchor, &edit.line)
            } else {
                insert_before_marker(&text, edit.anchor, &edit.line)
            };
            let text = changed.ok_or_else(|| Error::MissingMarker {
                path: root.join(edit.file),
                marker: edit.anchor.to_owned(),
            })?;
            edited.push((edit.file.to_owned(), text));
        }

        let mut changed = Vec::new();
        for (path, text) in files.iter().chain(edited.iter()) {
            let path = root.join(path);
            write_atomically(&path, text)?;
            changed.push(path);
        }
        Ok(changed)
    }
}

/// Inserts `line` (one or more lines) after the line that is `anchor`
/// (trimmed), each with the anchor's indentation; `None` when no line is.
fn insert_after_line(text: &str, anchor: &str, line: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + line.len() + 8);
    let mut found = false;
    for existing in text.split_inclusive('\n') {
        out.push_str(existing);
        if !found && existing.trim() == anchor {
            if !existing.ends_with('\n') {
                out.push('\n');
            }
            let indent: String = existing.chars().take_while(|c| c.is_whitespace()).collect();
            for part in line.lines() {
                out.push_str(&indent);
                out.push_str(part);
                out.push('\n');
            }
            found = true;
        }
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_after_the_anchor_with_its_indentation() {
        let text = "a\n    pub mod controllers;\nb\n";
        assert_eq!(
            insert_after_line(text, "pub mod controllers;", "pub mod webhooks;").unwrap(),
            "a\n    pub mod controllers;\n    pub mod webhooks;\nb\n"
        );
        assert!(insert_after_line(text, "missing", "x").is_none());
    }
}
