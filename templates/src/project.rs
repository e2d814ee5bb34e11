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
    /// The `[dependencies]` and `[dev-dependencies]` lines.
    fn lines(&self) -> Result<(String, String), Error> {
        Ok(match self {
            Self::Version(version) => (
                format!("opkit = {}", toml_string(version)),
                format!(
                    "opkit = {{ version = {}, features = [\"envtest\"] }}",
                    toml_string(version)
                ),
            ),
            Self::Path(path) => {
                let path = resolve_opkit_path(path)?;
                let path = toml_string(&path.to_string_lossy());
                (
                    format!("opkit = {{ path = {path} }}"),
                    format!("opkit = {{ path = {path}, features = [\"envtest\"] }}"),
                )
            }
        })
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

        let staging = parent.join(format!(".{}.opkit-new-{}", self.name, std::process::id()));
        // A leftover of an interrupted run must not leak into this one.
        let _ = std::fs::remove_dir_all(&staging);
        let written = write_tree(&staging, &files).and_then(|()| {
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
}

/// The markers `create api` inserts at: (file, marker, line to insert).
type Edit = (&'static str, &'static str, String);

impl CreateApi {
    /// Validates, then adds the kind's files and registers it in
    /// `src/api/mod.rs`, `src/controllers/mod.rs`, `src/lib.rs` and
    /// `PROJECT`. Every check (markers included) runs before the first
    /// write. Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, Error> {
        validate_kind(&self.kind)?;
        if let Some(version) = &self.version {
            validate_version(version)?;
        }
        let mut project = ProjectFile::read(&self.dir)?;
        if project.kinds.iter().any(|k| k == &self.kind) {
            return Err(Error::KindExists {
                kind: self.kind.clone(),
            });
        }
        let version = self.version.as_deref().unwrap_or(&project.version);
        let values = kind_values(&project.name, &project.group, version, &self.kind);
        let files = render_set(templates::API, &values)?;
        for (path, _) in &files {
            let path = self.dir.join(path);
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
                None => read(&self.dir.join(file))?,
            };
            let text =
                insert_before_marker(&text, marker, &line).ok_or_else(|| Error::MissingMarker {
                    path: self.dir.join(file),
                    marker: marker.to_owned(),
                })?;
            edited.push((file.to_owned(), text));
        }
        project.kinds.push(self.kind.clone());
        edited.push(("PROJECT".to_owned(), project.render()));

        let mut changed = Vec::new();
        for (path, text) in files.iter().chain(edited.iter()) {
            let path = self.dir.join(path);
            write_atomically(&path, text)?;
            changed.push(path);
        }
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

/// `cargo opkit manifests`: builds the project in `dir` and runs its
/// binary's `manifests` command, which renders the CRDs and RBAC rules
/// from the code into `dir/deploy`. Returns what the binary printed.
pub fn manifests(dir: &Path) -> Result<String, Error> {
    let project = ProjectFile::read(dir)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(dir)
        .args([
            "run",
            "--quiet",
            "--bin",
            &project.name,
            "--",
            "manifests",
            "--dir",
            "deploy",
        ])
        .output()
        .map_err(|e| Error::Manifests {
            detail: format!("cannot run cargo: {e}"),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Manifests {
            detail: format!(
                "`cargo run --bin {} -- manifests` failed ({}):\n{}",
                project.name,
                output.status,
                tail.join("\n")
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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
        ] {
            let text =
                std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!text.contains("{{"), "{file} has a placeholder left");
        }
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"demo-operator\"") && cargo.contains("opkit = \"0.1\""));
        // No staging directory is left behind.
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("demo-operator")]);
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
    fn create_api_outside_a_project_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = CreateApi {
            dir: tmp.path().to_owned(),
            kind: "Gadget".into(),
            version: None,
        }
        .create()
        .unwrap_err();
        assert!(err.to_string().contains("not an opkit project"), "{err}");
    }
}
