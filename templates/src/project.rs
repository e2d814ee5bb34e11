//! The three commands: `new`, `create api`, `manifests`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;
use crate::names::{snake_case, validate_group, validate_kind, validate_name, validate_version};
use crate::render::Values;
use crate::templates;

/// Where a generated project gets opkit from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpkitDependency {
    /// From the registry: a version requirement such as `0.1`.
    Version(String),
    /// From a local checkout: the opkit crate's directory (`sdk/`) or the
    /// repository root holding it.
    Path(PathBuf),
}

impl OpkitDependency {
    /// The opkit checkout this `cargo-opkit` was built from (its `sdk/`
    /// directory), if it still exists and still holds the opkit crate: a
    /// `cargo-opkit` built or installed from a checkout makes projects
    /// that build against that checkout with no flag.
    pub fn built_from() -> Option<Self> {
        let sdk = Path::new(env!("OPKIT_BUILT_FROM_SDK"));
        resolve_opkit_path(sdk).ok().map(Self::Path)
    }

    /// What `cargo opkit new` uses when given neither `--opkit-path` nor
    /// `--opkit-version`: [`built_from`](Self::built_from), else the
    /// published version matching this `cargo-opkit`.
    pub fn default_for_new() -> Self {
        Self::built_from().unwrap_or_else(|| Self::Version(env!("CARGO_PKG_VERSION").to_owned()))
    }

    /// One line saying which opkit a project uses and how to switch.
    pub fn describe(&self) -> String {
        let published = published_requirement();
        match self {
            Self::Version(version) => format!(
                "opkit: the published crates, `opkit = \"{version}\"` and \
                 `opkit-envtest = \"{version}\"` in Cargo.toml"
            ),
            Self::Path(path) => format!(
                "opkit: the local checkout {} (path dependencies); to use the published crates, \
                 set `opkit = \"{published}\"` and `opkit-envtest = \"{published}\"` in \
                 Cargo.toml (or pass --opkit-version {published})",
                resolve_opkit_path(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
            ),
        }
    }

    /// The `[dependencies]` line (opkit) and the `[dev-dependencies]` line
    /// (opkit-envtest, the test control plane, from the same place).
    fn lines(&self) -> Result<(String, String), Error> {
        Ok(match self {
            Self::Version(version) => (
                format!("opkit = {}", toml_string(version)),
                format!("opkit-envtest = {}", toml_string(version)),
            ),
            Self::Path(path) => {
                let sdk = resolve_opkit_path(path)?;
                let envtest = resolve_envtest_path(&sdk)?;
                (
                    format!(
                        "opkit = {{ path = {} }}",
                        toml_string(&sdk.to_string_lossy())
                    ),
                    format!(
                        "opkit-envtest = {{ path = {} }}",
                        toml_string(&envtest.to_string_lossy())
                    ),
                )
            }
        })
    }
}

/// The opkit-envtest crate of the checkout whose opkit crate is `sdk`: its
/// sibling `envtest/`, absolute.
fn resolve_envtest_path(sdk: &Path) -> Result<PathBuf, Error> {
    let dir = sdk
        .parent()
        .map(|root| root.join("envtest"))
        .unwrap_or_else(|| sdk.join("../envtest"));
    let is_envtest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit-envtest\""));
    if !is_envtest {
        return Err(Error::Io {
            path: dir,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no opkit-envtest crate here (expected next to the opkit crate, \
                 a Cargo.toml with name = \"opkit-envtest\")",
            ),
        });
    }
    std::fs::canonicalize(&dir).map_err(|source| Error::Io { path: dir, source })
}

/// The published version requirement matching this build: `0.1` for 0.1.x.
fn published_requirement() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_owned(),
        _ => version.to_owned(),
    }
}

/// The opkit crate directory at `path` (or at `path/sdk`), absolute.
fn resolve_opkit_path(path: &Path) -> Result<PathBuf, Error> {
    let is_opkit = |dir: &Path| {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit\""))
    };
    for candidate in [path.to_owned(), path.join("sdk")] {
        if is_opkit(&candidate) {
            return std::fs::canonicalize(&candidate).map_err(|source| Error::Io {
                path: candidate,
                source,
            });
        }
    }
    Err(Error::Io {
        path: path.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no opkit crate here (expected a Cargo.toml with name = \"opkit\", or sdk/Cargo.toml)",
        ),
    })
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `cargo opkit new`: a new project in `dir/name`.
#[derive(Debug, Clone)]
pub struct NewProject {
    /// The project (and crate, and binary) name.
    pub name: String,
    /// The API group of its first kind.
    pub group: String,
    /// The API version of its first kind.
    pub version: String,
    /// Its first kind.
    pub kind: String,
    /// Where to create it (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Where it gets opkit from.
    pub opkit: OpkitDependency,
}

impl NewProject {
    /// Validates the input, then writes the whole project at once: files
    /// go to a hidden sibling directory that is renamed into place, so a
    /// failure leaves nothing behind. Returns the project's directory.
    pub fn create(&self) -> Result<PathBuf, Error> {
        self.create_with_lockfile(None)
    }

    /// As [`create`](Self::create), seeding the project's `Cargo.lock`
    /// with `lockfile` (cargo keeps only the entries it needs), so its
    /// dependencies resolve to known versions.
    pub fn create_with_lockfile(&self, lockfile: Option<&Path>) -> Result<PathBuf, Error> {
        self.create_staged(lockfile, |_| Ok(()))
    }

    /// As [`create_with_lockfile`](Self::create_with_lockfile), and builds
    /// the project to write `deploy/01-crds.yaml` and `deploy/03-rbac.yaml`
    /// (see [`manifests`]) before moving it into place: if the build fails
    /// (opkit not found, a compile error), nothing is left behind.
    pub fn create_with_manifests(&self, lockfile: Option<&Path>) -> Result<PathBuf, Error> {
        self.create_staged(lockfile, manifests_in)
    }

    /// Writes the project to a hidden sibling, runs `finish` on it, and
    /// renames it into place only if both succeed.
    fn create_staged(
        &self,
        lockfile: Option<&Path>,
        finish: impl FnOnce(&Path) -> Result<(), Error>,
    ) -> Result<PathBuf, Error> {
        validate_name(&self.name)?;
        validate_group(&self.group)?;
        validate_version(&self.version)?;
        validate_kind(&self.kind)?;
        let parent = match &self.dir {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|source| Error::Io {
                path: PathBuf::from("."),
                source,
            })?,
        };
        let target = parent.join(&self.name);
        if target.exists() {
            return Err(Error::Exists { path: target });
        }
        if !parent.is_dir() {
            return Err(Error::Io {
                path: parent,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
            });
        }
        let (dependency, dev_dependency) = self.opkit.lines()?;
        let mut values = kind_values(&self.name, &self.group, &self.version, &self.kind);
        values
            .set("opkit_dependency", dependency)
            .set("opkit_dev_dependency", dev_dependency);
        let mut files = render_set(templates::PROJECT, &values)?;
        files.extend(render_set(templates::API, &values)?);
        if let Some(lockfile) = lockfile {
            let text = std::fs::read_to_string(lockfile).map_err(|source| Error::Io {
                path: lockfile.to_owned(),
                source,
            })?;
            files.push(("Cargo.lock".to_owned(), text));
        }

        let staging_prefix = format!(".{}.opkit-new-", self.name);
        remove_abandoned_staging(&parent, &staging_prefix);
        let staging = parent.join(format!("{staging_prefix}{}", std::process::id()));
        // A leftover of an interrupted run must not leak into this one.
        let _ = std::fs::remove_dir_all(&staging);
        let written = write_tree(&staging, &files)
            .and_then(|()| format_rust(&staging, files.iter().map(|(path, _)| path.as_str())))
            .and_then(|()| finish(&staging))
            .and_then(|()| {
                if target.exists() {
                    return Err(Error::Exists {
                        path: target.clone(),
                    });
                }
                std::fs::rename(&staging, &target).map_err(|source| Error::Io {
                    path: target.clone(),
                    source,
                })
            });
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
        Ok(target)
    }
}

/// Removes staging directories (`{prefix}{pid}` in `parent`) left by a
/// `cargo opkit new` that was killed (Ctrl-C during the build): those whose
/// process is gone. Where processes cannot be checked (no `/proc`), keeps
/// them.
fn remove_abandoned_staging(parent: &Path, prefix: &str) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !proc.join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `cargo opkit create api`: another kind and its controller in an
/// existing project.
#[derive(Debug, Clone)]
pub struct CreateApi {
    /// The project's directory.
    pub dir: PathBuf,
    /// The new kind.
    pub kind: String,
    /// Its API version (default: the project's).
    pub version: Option<String>,
    /// Its API group (default: the project's).
    pub group: Option<String>,
}

/// The markers `create api` inserts at: (file, marker, line to insert).
type Edit = (&'static str, &'static str, String);

impl CreateApi {
    /// Finds the project holding `dir` ([`find_project`]), validates, then
    /// adds the kind's files and registers it in
    /// `src/api/mod.rs`, `src/controllers/mod.rs`, `src/lib.rs` and
    /// `PROJECT`. Every check (markers included) runs before the first
    /// write. Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, Error> {
        validate_kind(&self.kind)?;
        if let Some(version) = &self.version {
            validate_version(version)?;
        }
        if let Some(group) = &self.group {
            validate_group(group)?;
        }
        let dir = find_project(&self.dir)?;
        let mut project = ProjectFile::read(&dir)?;
        if project.kinds.iter().any(|k| k == &self.kind) {
            return Err(Error::KindExists {
                kind: self.kind.clone(),
            });
        }
        let version = self.version.as_deref().unwrap_or(&project.version);
        let group = self.group.as_deref().unwrap_or(&project.group);
        let values = kind_values(&project.name, group, version, &self.kind);
        let files = render_set(templates::API, &values)?;
        for (path, _) in &files {
            let path = dir.join(path);
            if path.exists() {
                return Err(Error::Exists { path });
            }
        }
        let snake = snake_case(&self.kind);
        let kind = &self.kind;
        let edits: [Edit; 5] = [
            (
                "src/api/mod.rs",
                "// opkit:scaffold:api",
                format!("pub mod {snake};"),
            ),
            (
                "src/controllers/mod.rs",
                "// opkit:scaffold:controllers",
                format!("pub mod {snake};"),
            ),
            (
                "src/lib.rs",
                "// opkit:scaffold:controllers",
                format!("controllers::{snake}::{kind}Reconciler.add_to(manager)?;"),
            ),
            (
                "src/lib.rs",
                "// opkit:scaffold:crds",
                format!("api::{snake}::{kind}::crd(),"),
            ),
            (
                "src/lib.rs",
                "// opkit:scaffold:rbac",
                format!(".merge(controllers::{snake}::{kind}Reconciler::rbac_rules())"),
            ),
        ];
        let mut edited: Vec<(String, String)> = Vec::new();
        for (file, marker, line) in edits {
            let text = match edited.iter().position(|(f, _)| f == file) {
                Some(i) => edited.remove(i).1,
                None => read(&dir.join(file))?,
            };
            let text =
                insert_before_marker(&text, marker, &line).ok_or_else(|| Error::MissingMarker {
                    path: dir.join(file),
                    marker: marker.to_owned(),
                })?;
            edited.push((file.to_owned(), text));
        }
        project.kinds.push(self.kind.clone());
        edited.push(("PROJECT".to_owned(), project.render()));

        let mut changed = Vec::new();
        for (path, text) in files.iter().chain(edited.iter()) {
            let path = dir.join(path);
            write_atomically(&path, text)?;
            changed.push(path);
        }
        format_rust(
            &dir,
            files
                .iter()
                .chain(edited.iter())
                .map(|(path, _)| path.as_str()),
        )?;
        Ok(changed)
    }
}

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

/// The `PROJECT` file: what `create api` and `manifests` need to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    /// The project (crate and binary) name.
    pub name: String,
    /// The API group.
    pub group: String,
    /// The default API version.
    pub version: String,
    /// The kinds, in the order they were added.
    pub kinds: Vec<String>,
}

impl ProjectFile {
    /// Reads `dir/PROJECT`.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("PROJECT");
        if !path.is_file() {
            return Err(Error::NotAProject {
                path: dir.to_owned(),
            });
        }
        let text = read(&path)?;
        let get = |key: &str| -> Result<String, Error> {
            text.lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == key).then(|| v.trim().to_owned())
                })
                .filter(|v| !v.is_empty())
                .ok_or_else(|| Error::BadProjectFile {
                    path: path.clone(),
                    detail: format!("no `{key}:` line"),
                })
        };
        Ok(Self {
            name: get("name")?,
            group: get("group")?,
            version: get("version")?,
            kinds: get("kinds")?
                .split(',')
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty())
                .collect(),
        })
    }

    fn render(&self) -> String {
        format!(
            "# Written by `cargo opkit`, read by `cargo opkit create api` and `cargo opkit manifests`.\n\
             name: {}\ngroup: {}\nversion: {}\nkinds: {}\n",
            self.name,
            self.group,
            self.version,
            self.kinds.join(", ")
        )
    }
}

/// The project directory holding `start`: the nearest ancestor (or
/// `start` itself) with a `PROJECT` file next to a `Cargo.toml`, as cargo
/// finds its manifest from any subdirectory.
pub fn find_project(start: &Path) -> Result<PathBuf, Error> {
    let start = std::path::absolute(start).map_err(|source| Error::Io {
        path: start.to_owned(),
        source,
    })?;
    start
        .ancestors()
        .find(|dir| dir.join("PROJECT").is_file() && dir.join("Cargo.toml").is_file())
        .map(Path::to_owned)
        .ok_or(Error::NotAProject { path: start })
}

/// The target directory `cargo opkit` builds generated projects in, shared
/// by all of them so their dependencies compile once: `$CARGO_TARGET_DIR`
/// if set, else `$OPKIT_CACHE/target`, else `~/.cache/opkit/target`
/// (`None` when neither `OPKIT_CACHE` nor `HOME` is set: cargo's default).
/// The generated Makefile uses the same directory.
pub fn shared_target_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(cache) = set("OPKIT_CACHE") {
        return Some(PathBuf::from(cache).join("target"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".cache/opkit/target"))
}

/// `cargo opkit manifests`: builds the project in `dir` (or the project
/// holding it, see [`find_project`]) and runs its binary's `manifests`
/// command, which renders the CRDs and RBAC rules from the code into
/// `deploy/`. Cargo's progress and errors go to stderr as the build runs;
/// the binary's report (the files written) goes to stdout. Builds in
/// [`shared_target_dir`].
pub fn manifests(dir: &Path) -> Result<(), Error> {
    manifests_in(&find_project(dir)?)
}

/// [`manifests`] in exactly `dir`.
fn manifests_in(dir: &Path) -> Result<(), Error> {
    let project = ProjectFile::read(dir)?;
    let mut command = crate::cargo_command();
    command.current_dir(dir).args([
        "run",
        "--bin",
        &project.name,
        "--",
        "manifests",
        "--dir",
        "deploy",
    ]);
    if let Some(target) = shared_target_dir() {
        command.env("CARGO_TARGET_DIR", target);
    }
    let status = command.status().map_err(|e| Error::Manifests {
        detail: format!("cannot run cargo: {e}"),
    })?;
    if !status.success() {
        return Err(Error::Manifests {
            detail: format!(
                "`cargo run --bin {} -- manifests` failed ({status}); cargo's output is above",
                project.name
            ),
        });
    }
    Ok(())
}

/// Runs `rustfmt` on the `.rs` files among `files` (relative to `root`),
/// so the code is formatted whatever the length of the names filled in.
/// Without rustfmt installed the files stay as rendered (they are close to
/// formatted already).
fn format_rust<'a>(root: &Path, files: impl Iterator<Item = &'a str>) -> Result<(), Error> {
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
            return Err(Error::Template {
                template: "rustfmt".to_owned(),
                detail: format!("cannot run rustfmt: {e}"),
            });
        }
    };
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Template {
            template: "rustfmt".to_owned(),
            detail: format!(
                "rustfmt rejected the generated code (a bug in cargo-opkit): {}",
                String::from_utf8_lossy(&output.stderr)
            ),
        })
    }
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
) -> Result<Vec<(String, String)>, Error> {
    set.iter()
        .map(|(path, text)| Ok((values.output_path(path)?, values.render(path, text)?)))
        .collect()
}

pub(crate) fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

fn write_tree(root: &Path, files: &[(String, String)]) -> Result<(), Error> {
    for (relative, text) in files {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| Error::Io { path, source })?;
    }
    Ok(())
}

/// Writes `text` to a temporary sibling, then renames it over `path`.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.opkit-tmp"));
    std::fs::write(&temporary, text).map_err(|source| Error::Io {
        path: temporary.clone(),
        source,
    })?;
    std::fs::rename(&temporary, path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(dir: &Path) -> NewProject {
        NewProject {
            name: "demo-operator".into(),
            group: "demo.example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            dir: Some(dir.to_owned()),
            opkit: OpkitDependency::Version("0.1".into()),
        }
    }

    #[test]
    fn new_writes_every_template_and_no_placeholder_is_left() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        for file in [
            "Cargo.toml",
            "PROJECT",
            "Makefile",
            "Dockerfile",
            "README.md",
            ".gitignore",
            "src/main.rs",
            "src/lib.rs",
            "src/api/mod.rs",
            "src/api/widget.rs",
            "src/controllers/widget.rs",
            "tests/widget_controller.rs",
            "tests/manifests.rs",
            "deploy/00-namespace.yaml",
            "deploy/02-service-account.yaml",
            "deploy/04-deployment.yaml",
            "samples/widget.yaml",
            ".github/workflows/test.yml",
        ] {
            let text =
                std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!text.contains("{{"), "{file} has a placeholder left");
        }
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"demo-operator\"") && cargo.contains("opkit = \"0.1\""));
        assert!(
            cargo.contains("[dev-dependencies]\nopkit-envtest = \"0.1\"\n"),
            "{cargo}"
        );
        // No staging directory is left behind.
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("demo-operator")]);
    }

    /// A checkout's opkit and opkit-envtest, by path, from the repository
    /// root or from `sdk/`; a directory without opkit-envtest beside opkit is
    /// refused (a path opkit with a published opkit-envtest would be two opkits).
    #[test]
    fn path_dependencies_name_both_crates_of_the_checkout() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for (dir, name) in [("sdk", "opkit"), ("envtest", "opkit-envtest")] {
            std::fs::create_dir(root.join(dir)).unwrap();
            std::fs::write(
                root.join(dir).join("Cargo.toml"),
                format!("[package]\nname = \"{name}\"\n"),
            )
            .unwrap();
        }
        let root = std::fs::canonicalize(root).unwrap();
        for given in [root.clone(), root.join("sdk")] {
            let (dependency, dev_dependency) = OpkitDependency::Path(given).lines().unwrap();
            assert_eq!(
                dependency,
                format!("opkit = {{ path = \"{}\" }}", root.join("sdk").display())
            );
            assert_eq!(
                dev_dependency,
                format!(
                    "opkit-envtest = {{ path = \"{}\" }}",
                    root.join("envtest").display()
                )
            );
        }
        std::fs::remove_dir_all(root.join("envtest")).unwrap();
        assert!(OpkitDependency::Path(root).lines().is_err());
    }

    /// The parts of a GitHub Actions workflow the generated one must have.
    #[derive(serde::Deserialize)]
    struct Workflow {
        name: String,
        on: std::collections::BTreeMap<String, Option<serde::de::IgnoredAny>>,
        jobs: std::collections::BTreeMap<String, Job>,
    }

    #[derive(serde::Deserialize)]
    struct Job {
        #[serde(rename = "runs-on")]
        runs_on: String,
        steps: Vec<Step>,
    }

    #[derive(serde::Deserialize)]
    struct Step {
        uses: Option<String>,
        run: Option<String>,
    }

    #[test]
    fn the_ci_workflow_is_valid_yaml_that_runs_make_test() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        let text = std::fs::read_to_string(dir.join(".github/workflows/test.yml")).unwrap();
        let workflow: Workflow = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(workflow.name, "test");
        assert!(workflow.on.contains_key("push") && workflow.on.contains_key("pull_request"));
        let job = &workflow.jobs["test"];
        assert_eq!(job.runs_on, "ubuntu-latest");
        assert!(
            job.steps
                .iter()
                .all(|s| s.uses.is_some() != s.run.is_some())
        );
        let runs: Vec<&str> = job.steps.iter().filter_map(|s| s.run.as_deref()).collect();
        assert!(runs.iter().any(|r| r.starts_with("make test")), "{runs:?}");
        assert!(
            runs.iter().any(|r| r.contains("KUBEBUILDER_ASSETS")),
            "{runs:?}"
        );
    }

    #[test]
    fn a_staging_directory_of_a_killed_run_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        // No process has pid 4294967295 (above Linux's pid_max).
        let abandoned = tmp.path().join(".demo-operator.opkit-new-4294967295");
        std::fs::create_dir_all(abandoned.join("src")).unwrap();
        project(tmp.path()).create().unwrap();
        assert!(!abandoned.exists());
        assert!(tmp.path().join("demo-operator/Cargo.toml").is_file());
    }

    #[test]
    fn bad_input_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bad = project(tmp.path());
        bad.kind = "widget".into();
        assert!(matches!(bad.create(), Err(Error::InvalidKind { .. })));
        let mut bad = project(tmp.path());
        bad.group = "nodots".into();
        assert!(matches!(bad.create(), Err(Error::InvalidGroup { .. })));
        let mut bad = project(tmp.path());
        bad.opkit = OpkitDependency::Path(tmp.path().join("nowhere"));
        assert!(matches!(bad.create(), Err(Error::Io { .. })));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

        project(tmp.path()).create().unwrap();
        let again = project(tmp.path()).create().unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
    }

    #[test]
    fn create_api_registers_the_kind_at_the_markers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        let api = CreateApi {
            dir: dir.clone(),
            kind: "GuestBook".into(),
            version: Some("v1beta1".into()),
            group: None,
        };
        api.create().unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("    controllers::guest_book::GuestBookReconciler.add_to(manager)?;\n    // opkit:scaffold:controllers"), "{lib}");
        assert!(lib.contains(
            "        api::guest_book::GuestBook::crd(),\n        // opkit:scaffold:crds"
        ));
        assert!(lib.contains(".merge(controllers::guest_book::GuestBookReconciler::rbac_rules())"));
        let types = std::fs::read_to_string(dir.join("src/api/guest_book.rs")).unwrap();
        assert!(
            types.contains("version = \"v1beta1\"")
                && types.contains("group = \"demo.example.com\"")
        );
        let project = ProjectFile::read(&dir).unwrap();
        assert_eq!(project.kinds, ["Widget", "GuestBook"]);

        assert!(matches!(api.create(), Err(Error::KindExists { .. })));
        let before = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        std::fs::write(dir.join("src/api/mod.rs"), "pub mod widget;\n").unwrap();
        let err = CreateApi {
            dir: dir.clone(),
            kind: "Gadget".into(),
            version: None,
            group: None,
        }
        .create()
        .unwrap_err();
        assert!(matches!(err, Error::MissingMarker { .. }), "{err}");
        assert!(!dir.join("src/api/gadget.rs").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
            before
        );
    }

    #[test]
    fn create_api_from_a_subdirectory_with_another_group() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        let changed = CreateApi {
            dir: dir.join("src/controllers"),
            kind: "Gadget".into(),
            version: None,
            group: Some("other.example.org".into()),
        }
        .create()
        .unwrap();
        assert!(
            changed.contains(&dir.join("src/api/gadget.rs")),
            "{changed:?}"
        );
        let types = std::fs::read_to_string(dir.join("src/api/gadget.rs")).unwrap();
        assert!(types.contains("group = \"other.example.org\""), "{types}");
        assert_eq!(ProjectFile::read(&dir).unwrap().kinds, ["Widget", "Gadget"]);
        assert_eq!(find_project(&dir.join("src/api")).unwrap(), dir);

        let err = CreateApi {
            dir: dir.clone(),
            kind: "Gizmo".into(),
            version: None,
            group: Some("nodots".into()),
        }
        .create()
        .unwrap_err();
        assert!(matches!(err, Error::InvalidGroup { .. }), "{err}");
        assert!(!dir.join("src/api/gizmo.rs").exists());
    }

    #[test]
    fn create_api_outside_a_project_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = CreateApi {
            dir: tmp.path().to_owned(),
            kind: "Gadget".into(),
            version: None,
            group: None,
        }
        .create()
        .unwrap_err();
        assert!(
            err.to_string().contains("not inside an opkit project"),
            "{err}"
        );
    }
}
