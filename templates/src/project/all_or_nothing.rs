//! Writing a scaffold into an existing project all or nothing: `create api`
//! and `create webhook` write new files and change existing ones, format
//! them and build the project; if any of that fails, every file written is
//! removed and every file changed gets its old contents back, as `new`
//! leaves nothing behind when it fails.

use std::path::{Path, PathBuf};

use super::files::{already_formatted, format_rust, write_atomically};
use crate::error::ScaffoldError;

/// Writes `created` (new files) and `edited` (new contents of existing
/// files), paths relative to `root`; formats the new `.rs` files and the
/// edited ones that were formatted before; then runs `finish` on `root`
/// (the build that renders the manifests, or nothing). Returns the files
/// written. If a step fails, the project is put back as it was and the
/// error says so ([`ScaffoldError::RolledBack`]).
pub(crate) fn write_all_or_nothing(
    root: &Path,
    created: &[(String, String)],
    edited: &[(String, String)],
    finish: impl FnOnce(&Path) -> Result<(), ScaffoldError>,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    // Files it changes are formatted again only if they were formatted: a
    // file in the user's own style keeps it.
    let formatted = already_formatted(root, edited.iter().map(|(path, _)| path.as_str()));
    let mut journal = Journal::default();
    let written = (|| {
        let mut written = Vec::new();
        for (path, text) in created.iter().chain(edited) {
            let path = root.join(path);
            journal.write(&path, text)?;
            written.push(path);
        }
        // Formatted whatever the length of the names filled in, so `make
        // lint` (cargo fmt --check) passes right after.
        format_rust(
            root,
            created
                .iter()
                .map(|(path, _)| path.as_str())
                .chain(formatted),
        )?;
        finish(root)?;
        Ok(written)
    })();
    written.map_err(|cause| journal.undo(cause))
}

/// What a scaffold did to a project, so it can be undone: the files it
/// created (and the directories it made for them) and the old contents of
/// the files it replaced.
#[derive(Debug, Default)]
struct Journal {
    created_files: Vec<PathBuf>,
    /// Outermost first.
    created_dirs: Vec<PathBuf>,
    replaced: Vec<(PathBuf, Vec<u8>)>,
}

impl Journal {
    /// Writes `text` to `path` (atomically), first noting what was there.
    fn write(&mut self, path: &Path, text: &str) -> Result<(), ScaffoldError> {
        match std::fs::read(path) {
            Ok(old) => {
                if !self.replaced.iter().any(|(p, _)| p == path) {
                    self.replaced.push((path.to_owned(), old));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut missing: Vec<PathBuf> = path
                    .ancestors()
                    .skip(1)
                    .take_while(|dir| !dir.as_os_str().is_empty() && !dir.exists())
                    .map(Path::to_owned)
                    .collect();
                missing.reverse();
                self.created_dirs.extend(missing);
                self.created_files.push(path.to_owned());
            }
            Err(source) => {
                return Err(ScaffoldError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        }
        write_atomically(path, text)
    }

    /// Puts back what [`write`](Self::write) changed, newest first, and
    /// returns the error to report for `cause`: [`ScaffoldError::RolledBack`],
    /// or [`ScaffoldError::RollbackFailed`] naming the first file that could
    /// not be put back (the others are still tried).
    fn undo(self, cause: ScaffoldError) -> ScaffoldError {
        // The temporary sibling of a write that failed half-way.
        for path in self
            .created_files
            .iter()
            .chain(self.replaced.iter().map(|(p, _)| p))
        {
            if let Some(name) = path.file_name() {
                let temporary = format!(".{}.opkit-tmp", name.to_string_lossy());
                let _ = std::fs::remove_file(path.with_file_name(temporary));
            }
        }
        let mut failed: Option<(PathBuf, std::io::Error)> = None;
        let mut note = |path: &Path, result: std::io::Result<()>| match result {
            // A file whose write failed before it existed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) if failed.is_none() => failed = Some((path.to_owned(), source)),
            _ => {}
        };
        for (path, old) in self.replaced.iter().rev() {
            note(path, std::fs::write(path, old));
        }
        for path in self.created_files.iter().rev() {
            note(path, std::fs::remove_file(path));
        }
        for dir in self.created_dirs.iter().rev() {
            note(dir, std::fs::remove_dir(dir));
        }
        match failed {
            None => ScaffoldError::RolledBack {
                cause: Box::new(cause),
            },
            Some((path, source)) => ScaffoldError::RollbackFailed {
                cause: Box::new(cause),
                path,
                source,
            },
        }
    }
}

/// Every file under `root` with its contents, and every directory (as
/// `None`): what the scaffold tests compare before and after.
#[cfg(test)]
pub(super) fn tree(root: &Path) -> std::collections::BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_owned();
            if path.is_dir() {
                out.insert(relative, None);
                pending.push(path);
            } else {
                out.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_finish_removes_what_was_written_and_restores_what_was_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub mod a;\n").unwrap();
        std::fs::write(root.join("PROJECT"), "kinds: [A]\n").unwrap();
        let before = tree(root);

        let created = [
            ("src/b.rs".to_owned(), "pub struct B;\n".to_owned()),
            ("src/deep/er/c.txt".to_owned(), "c\n".to_owned()),
        ];
        let edited = [
            (
                "src/lib.rs".to_owned(),
                "pub mod a;\npub mod b;\n".to_owned(),
            ),
            ("PROJECT".to_owned(), "kinds: [A, B]\n".to_owned()),
        ];
        let mut saw_written = false;
        let err = write_all_or_nothing(root, &created, &edited, |root| {
            saw_written = root.join("src/deep/er/c.txt").is_file()
                && std::fs::read_to_string(root.join("PROJECT")).unwrap() == "kinds: [A, B]\n";
            Err(ScaffoldError::Manifests {
                detail: "error[E0433]: cannot find `external` in `crate`".to_owned(),
            })
        })
        .unwrap_err();
        assert!(saw_written, "the build ran on the written project");
        assert!(
            matches!(&err, ScaffoldError::RolledBack { cause } if matches!(**cause, ScaffoldError::Manifests { .. })),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("E0433") && message.contains("nothing was changed"),
            "{message}"
        );
        assert_eq!(tree(root), before);
    }

    #[test]
    fn a_successful_finish_keeps_everything_and_names_the_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("PROJECT"), "kinds: [A]\n").unwrap();
        let written = write_all_or_nothing(
            root,
            &[("new/file.txt".to_owned(), "x\n".to_owned())],
            &[("PROJECT".to_owned(), "kinds: [A, B]\n".to_owned())],
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(written, [root.join("new/file.txt"), root.join("PROJECT")]);
        assert_eq!(
            std::fs::read_to_string(root.join("PROJECT")).unwrap(),
            "kinds: [A, B]\n"
        );
        assert!(root.join("new/file.txt").is_file());
    }

    #[test]
    fn a_directory_the_scaffold_did_not_make_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("src")).unwrap();
        let err = write_all_or_nothing(
            root,
            &[("src/new.rs".to_owned(), "x\n".to_owned())],
            &[],
            |_| {
                Err(ScaffoldError::Manifests {
                    detail: "no".to_owned(),
                })
            },
        )
        .unwrap_err();
        assert!(matches!(err, ScaffoldError::RolledBack { .. }), "{err:?}");
        assert!(root.join("src").is_dir());
        assert!(!root.join("src/new.rs").exists());
    }
}
