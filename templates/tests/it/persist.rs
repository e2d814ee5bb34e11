//! Generated projects that persist between runs: a journey generates (and
//! changes) a project in a temporary directory, then builds each state in
//! a directory of its own under the target directory, rewritten only where
//! it changed, so a run with nothing changed compiles no generated project
//! again. Shared by cargo-opkit's and opkit-tests' `it` binaries (the
//! latter includes this file by path).

use std::path::{Path, PathBuf};

/// A journey state's project in its persistent directory, locked for the
/// test holding it (another test, or another run, waits).
pub struct Persisted {
    /// The project's directory.
    pub dir: PathBuf,
    _lock: std::fs::File,
}

/// Brings `staged` (a project a journey generated, and changed, in a
/// temporary directory) into `GENERATED/STATE/NAME` (NAME: `staged`'s own
/// name; the test binaries' GENERATED: `$CARGO_TARGET_DIR/opkit-generated`):
/// a file whose contents are the same keeps its modification time, a
/// changed one is rewritten, one `staged` lacks is removed. Cargo builds in the shared target directory, so a state
/// that did not change since the last run compiles nothing.
///
/// Cargo names a path package's artifacts by package name and version,
/// not by directory: two states of one project (before and after a
/// `create api`) would overwrite each other's and rebuild every run. With
/// `package`, this state's Cargo.toml names the package so (its library
/// and binary keep their names, so code and tests are unchanged).
pub fn persist(generated: &Path, staged: &Path, state: &str, package: Option<&str>) -> Persisted {
    let root = generated.join(state);
    std::fs::create_dir_all(&root).expect("create the state's directory");
    let lock = std::fs::File::create(generated.join(format!("{state}.lock")))
        .expect("create the state's lock");
    lock.lock().expect("lock the state's directory");
    let name = staged.file_name().expect("a project directory");
    let dir = root.join(name);
    claim_package(
        generated,
        state,
        package.unwrap_or(name.to_str().expect("utf-8 project name")),
    );
    // Cargo.lock: cargo rewrites the staged one (the workspace's, pruned,
    // with what `--features otel` adds resolved anew); the rewritten one
    // stays while the staged one is what it was last run, so the same
    // versions are built again.
    let staged_lock = std::fs::read(staged.join("Cargo.lock")).ok();
    let last_staged_lock = root.join("staged-Cargo.lock");
    let built_lock = std::fs::read(dir.join("Cargo.lock"))
        .ok()
        .filter(|_| std::fs::read(&last_staged_lock).ok() == staged_lock);
    let rename = |relative: &Path, contents: Vec<u8>| match package {
        Some(package) if relative == Path::new("Cargo.toml") => {
            let text = String::from_utf8(contents).expect("utf-8 Cargo.toml");
            let project = name.to_str().expect("utf-8");
            let renamed = text
                .replacen(
                    &format!("[package]\nname = \"{project}\"\n"),
                    &format!("[package]\nname = \"{package}\"\n"),
                    1,
                )
                .replacen(
                    "[[bin]]\n",
                    &format!(
                        "[lib]\nname = \"{}\"\npath = \"src/lib.rs\"\n\n[[bin]]\n",
                        project.replace('-', "_")
                    ),
                    1,
                );
            assert_ne!(
                renamed, text,
                "Cargo.toml of {project}: no [package] name to rename"
            );
            renamed.into_bytes()
        }
        _ if relative == Path::new("Cargo.lock") => built_lock.clone().unwrap_or(contents),
        _ => contents,
    };
    sync_dir(staged, &dir, Path::new(""), &rename);
    if let Some(staged_lock) = staged_lock {
        std::fs::write(&last_staged_lock, staged_lock).expect("keep the staged Cargo.lock");
    }
    Persisted { dir, _lock: lock }
}

/// Records that `state` builds package `package` (`GENERATED/STATE/package`)
/// and panics if another state builds one of the same name. Every state
/// builds in the one target directory, where a package's binary is
/// `debug/PACKAGE`: two journeys running at once would replace each
/// other's binary between its build and its run (a `cargo opkit
/// manifests` of one project rendering the other's manifests).
fn claim_package(generated: &Path, state: &str, package: &str) {
    let claims = std::fs::read_dir(generated).expect("the generated projects' directory");
    for entry in claims.flatten() {
        let other = entry.file_name();
        let Some(other) = other.to_str() else {
            continue;
        };
        if other == state {
            continue;
        }
        let claimed = std::fs::read_to_string(entry.path().join("package")).unwrap_or_default();
        assert_ne!(
            claimed,
            package,
            "journey states `{other}` and `{state}` both build package `{package}` in one \
             target directory; give one a project name or `package` of its own (if `{other}` \
             is gone from the tests, remove {})",
            entry.path().display()
        );
    }
    let mine = generated.join(state).join("package");
    if std::fs::read_to_string(&mine).ok().as_deref() != Some(package) {
        std::fs::write(&mine, package).expect("record the state's package");
    }
}

/// Makes `to` hold what `from` holds, writing only files whose contents
/// differ (after `transform`) and removing what `from` lacks.
fn sync_dir(
    from: &Path,
    to: &Path,
    relative: &Path,
    transform: &dyn Fn(&Path, Vec<u8>) -> Vec<u8>,
) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    let mut kept = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name();
        let (source, target) = (entry.path(), to.join(&name));
        let relative = relative.join(&name);
        if entry.file_type().expect("file type").is_dir() {
            if target.is_file() {
                std::fs::remove_file(&target).expect("remove a file where a directory goes");
            }
            sync_dir(&source, &target, &relative, transform);
        } else {
            if target.is_dir() {
                std::fs::remove_dir_all(&target).expect("remove a directory where a file goes");
            }
            let contents = transform(&relative, std::fs::read(&source).expect("read"));
            if std::fs::read(&target).ok().as_ref() != Some(&contents) {
                std::fs::write(&target, &contents)
                    .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
                let permissions = entry.metadata().expect("metadata").permissions();
                std::fs::set_permissions(&target, permissions).expect("permissions");
            }
        }
        kept.insert(name);
    }
    for entry in std::fs::read_dir(to).expect("read the persistent directory") {
        let entry = entry.expect("a directory entry");
        if kept.contains(&entry.file_name()) {
            continue;
        }
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            std::fs::remove_dir_all(&path).expect("remove a directory");
        } else {
            std::fs::remove_file(&path).expect("remove a file");
        }
    }
}

/// Makes directory `to` hold what `from` holds (files rewritten only when
/// their contents differ).
pub fn sync_into(from: &Path, to: &Path) {
    sync_dir(from, to, Path::new(""), &|_, contents| contents);
}
