//! The three commands: `new`, `create api`, `manifests`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ScaffoldError;
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
    fn lines(&self) -> Result<(String, String), ScaffoldError> {
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
fn resolve_envtest_path(sdk: &Path) -> Result<PathBuf, ScaffoldError> {
    let dir = sdk
        .parent()
        .map(|root| root.join("envtest"))
        .unwrap_or_else(|| sdk.join("../envtest"));
    let is_envtest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit-envtest\""));
    if !is_envtest {
        return Err(ScaffoldError::Io {
            path: dir,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no opkit-envtest crate here (expected next to the opkit crate, \
                 a Cargo.toml with name = \"opkit-envtest\")",
            ),
        });
    }
    std::fs::canonicalize(&dir).map_err(|source| ScaffoldError::Io { path: dir, source })
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
fn resolve_opkit_path(path: &Path) -> Result<PathBuf, ScaffoldError> {
    let is_opkit = |dir: &Path| {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit\""))
    };
    for candidate in [path.to_owned(), path.join("sdk")] {
        if is_opkit(&candidate) {
            return std::fs::canonicalize(&candidate).map_err(|source| ScaffoldError::Io {
                path: candidate,
                source,
            });
        }
    }
    Err(ScaffoldError::Io {
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
    /// The API group of its first kind, and the default of `create api`.
    pub group: String,
    /// The API version of its first kind, and the default of `create api`.
    pub version: String,
    /// Its first kind; `None` for a project with a manager and no API yet
    /// (kubebuilder's `init`): `create api` adds the first.
    pub kind: Option<String>,
    /// Where to create it (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Where it gets opkit from.
    pub opkit: OpkitDependency,
    /// Deploy sharded instead of leader-elected: the binary's `--sharding`
    /// on, 3 replicas, the ring's Lease RBAC (see `opkit::shard`). The
    /// `--sharding` flag itself is generated only then.
    pub sharding: bool,
}

impl NewProject {
    /// Validates the input, then writes the whole project at once: files
    /// go to a hidden sibling directory that is renamed into place, so a
    /// failure leaves nothing behind. Returns the project's directory.
    pub fn create(&self) -> Result<PathBuf, ScaffoldError> {
        self.create_with_lockfile(None)
    }

    /// As [`create`](Self::create), seeding the project's `Cargo.lock`
    /// with `lockfile` (cargo keeps only the entries it needs), so its
    /// dependencies resolve to known versions.
    pub fn create_with_lockfile(&self, lockfile: Option<&Path>) -> Result<PathBuf, ScaffoldError> {
        self.create_staged(lockfile, |_| Ok(()))
    }

    /// As [`create_with_lockfile`](Self::create_with_lockfile), and builds
    /// the project to write `deploy/01-crds.yaml` and `deploy/03-rbac.yaml`
    /// (see [`manifests`]) before moving it into place: if the build fails
    /// (opkit not found, a compile error), nothing is left behind.
    pub fn create_with_manifests(&self, lockfile: Option<&Path>) -> Result<PathBuf, ScaffoldError> {
        self.create_staged(lockfile, manifests_in)
    }

    /// Checks every input (names, where the project goes, where opkit is)
    /// without writing or building anything: what `cargo opkit new` runs
    /// before it says it builds.
    pub fn validate(&self) -> Result<(), ScaffoldError> {
        self.checked()?;
        self.opkit.lines().map(|_| ())
    }

    /// The checked input's parent directory and project directory.
    fn checked(&self) -> Result<(PathBuf, PathBuf), ScaffoldError> {
        validate_name(&self.name)?;
        validate_group(&self.group)?;
        validate_version(&self.version)?;
        if let Some(kind) = &self.kind {
            validate_kind(kind)?;
        }
        let parent = match &self.dir {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|source| ScaffoldError::Io {
                path: PathBuf::from("."),
                source,
            })?,
        };
        let target = parent.join(&self.name);
        if target.exists() {
            return Err(ScaffoldError::Exists { path: target });
        }
        if !parent.is_dir() {
            return Err(ScaffoldError::Io {
                path: parent,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
            });
        }
        Ok((parent, target))
    }

    /// Writes the project to a hidden sibling, runs `finish` on it, and
    /// renames it into place only if both succeed.
    fn create_staged(
        &self,
        lockfile: Option<&Path>,
        finish: impl FnOnce(&Path) -> Result<(), ScaffoldError>,
    ) -> Result<PathBuf, ScaffoldError> {
        let (parent, target) = self.checked()?;
        let (dependency, dev_dependency) = self.opkit.lines()?;
        // Without a kind, the README names the one `create api` will add.
        let kind = self.kind.as_deref().unwrap_or("YourKind");
        let mut values = kind_values(&self.name, &self.group, &self.version, kind);
        let (for_kind, for_kind_md) = match &self.kind {
            Some(kind) => (
                format!(" for {kind} ({})", self.group),
                format!(" for `{kind}` (`{}/{}`)", self.group, self.version),
            ),
            None => (String::new(), String::new()),
        };
        sharding_values(&mut values, &self.name, self.sharding);
        values
            .set("opkit_dependency", dependency)
            .set("opkit_dev_dependency", dev_dependency)
            .set("for_kind", for_kind)
            .set("for_kind_md", for_kind_md);
        let mut files = render_set(templates::PROJECT, &values)?;
        let mut project = ProjectFile {
            name: self.name.clone(),
            group: self.group.clone(),
            version: self.version.clone(),
            resources: Vec::new(),
        };
        if let Some(kind) = &self.kind {
            let spec = ApiSpec {
                kind: kind.clone(),
                group: self.group.clone(),
                version: self.version.clone(),
                namespaced: true,
                external: None,
                domain: None,
            };
            let (new_files, edited) = plan_api(&spec, &project, |file| {
                files
                    .iter()
                    .find(|(path, _)| path == file)
                    .map(|(_, text)| text.clone())
                    .ok_or_else(|| ScaffoldError::Template {
                        template: file.to_owned(),
                        detail: "missing from the project templates".to_owned(),
                    })
            })?;
            for (path, text) in edited {
                if let Some(slot) = files.iter_mut().find(|(p, _)| *p == path) {
                    slot.1 = text;
                }
            }
            files.extend(new_files);
            project.resources.push(spec.into_resource());
        }
        files.push(("PROJECT".to_owned(), project.render()));
        if let Some(target) = shared_target_dir() {
            files.push((".cargo/config.toml".to_owned(), cargo_config(&target)));
        }
        if let Some(lockfile) = lockfile {
            let text = std::fs::read_to_string(lockfile).map_err(|source| ScaffoldError::Io {
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
                    return Err(ScaffoldError::Exists {
                        path: target.clone(),
                    });
                }
                std::fs::rename(&staging, &target).map_err(|source| ScaffoldError::Io {
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
/// existing project, or (`resource: false`) a controller for a kind the
/// project does not define.
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
    /// Whether its objects live in namespaces (`--namespaced`, default
    /// true); false makes a cluster-scoped CRD.
    pub namespaced: bool,
    /// Whether the project defines the type (`--resource`, default true).
    /// False scaffolds only a controller, for a built-in kind (from
    /// `k8s_openapi`, by group and version) or for `external_api_path`.
    pub resource: bool,
    /// The Rust path of a type the project does not define
    /// (`crate::external::Certificate`); needs `resource: false`.
    pub external_api_path: Option<String>,
    /// The domain of that type's group, recorded in `PROJECT`; needs
    /// `external_api_path`.
    pub external_api_domain: Option<String>,
}

impl CreateApi {
    /// A kind the project defines, namespaced, in the project's group and
    /// version unless set otherwise.
    pub fn new(dir: impl Into<PathBuf>, kind: impl Into<String>) -> Self {
        Self {
            dir: dir.into(),
            kind: kind.into(),
            version: None,
            group: None,
            namespaced: true,
            resource: true,
            external_api_path: None,
            external_api_domain: None,
        }
    }
}

/// What one kind adds to a project: `create api`'s input, checked.
#[derive(Debug, Clone)]
struct ApiSpec {
    kind: String,
    group: String,
    version: String,
    namespaced: bool,
    /// The Rust path of the type, for a kind the project does not define.
    external: Option<String>,
    domain: Option<String>,
}

impl ApiSpec {
    fn into_resource(self) -> ProjectResource {
        ProjectResource {
            kind: self.kind,
            group: self.group,
            version: self.version,
            namespaced: self.namespaced,
            external: self.external,
            domain: self.domain,
        }
    }
}

/// The markers `create api` inserts at: (file, marker, line to insert).
type Edit = (&'static str, &'static str, String);

/// Files as (path relative to the project, text).
type Files = Vec<(String, String)>;

/// The line of `src/lib.rs` the trait imports `create api` needs go
/// before (rustfmt sorts them into place).
const IMPORT_ANCHOR: &str = "use opkit::manager::{Manager, ManagerError};";

/// The files a kind adds (path, text) and the files it changes (path, new
/// text), the latter read with `read` (relative paths). Checks every
/// marker; writes nothing.
fn plan_api(
    spec: &ApiSpec,
    project: &ProjectFile,
    read: impl Fn(&str) -> Result<String, ScaffoldError>,
) -> Result<(Files, Files), ScaffoldError> {
    let mut values = kind_values(&project.name, &spec.group, &spec.version, &spec.kind);
    let api_version = if spec.group == "core" {
        spec.version.clone()
    } else {
        format!("{}/{}", spec.group, spec.version)
    };
    let kind_lower = spec.kind.to_ascii_lowercase();
    let (namespaced_attr, sample_namespace, test_api) = if spec.namespaced {
        (
            "\n    namespaced,".to_owned(),
            "\n  namespace: default".to_owned(),
            format!("Api::namespaced(client.clone(), \"{kind_lower}-test\")"),
        )
    } else {
        (
            String::new(),
            String::new(),
            "Api::all(client.clone())".to_owned(),
        )
    };
    values
        .set("api_version", api_version)
        .set("kind_path", spec.external.clone().unwrap_or_default())
        .set("namespaced_attr", namespaced_attr)
        .set("sample_namespace", sample_namespace)
        .set("test_api", test_api);
    let owned = spec.external.is_none();
    let files = render_set(
        if owned {
            templates::API
        } else {
            templates::CONTROLLER
        },
        &values,
    )?;
    let snake = snake_case(&spec.kind);
    let kind = &spec.kind;
    let mut edits: Vec<Edit> = Vec::new();
    if owned {
        edits.push((
            "src/api/mod.rs",
            "// opkit:scaffold:api",
            format!("pub mod {snake};"),
        ));
    }
    edits.push((
        "src/controllers/mod.rs",
        "// opkit:scaffold:controllers",
        format!("pub mod {snake};"),
    ));
    edits.push((
        "src/lib.rs",
        "// opkit:scaffold:controllers",
        format!("controllers::{snake}::{kind}Reconciler.add_to(manager)?;"),
    ));
    if owned {
        edits.push((
            "src/lib.rs",
            "// opkit:scaffold:crds",
            format!("api::{snake}::{kind}::crd(),"),
        ));
    }
    edits.push((
        "src/lib.rs",
        "// opkit:scaffold:rbac",
        format!(".merge(controllers::{snake}::{kind}Reconciler::rbac_rules())"),
    ));
    let mut edited: Vec<(String, String)> = Vec::new();
    for (file, marker, line) in edits {
        let text = match edited.iter().position(|(f, _)| f == file) {
            Some(i) => edited.remove(i).1,
            None => read(file)?,
        };
        let text = insert_before_marker(&text, marker, &line).ok_or_else(|| {
            ScaffoldError::MissingMarker {
                path: PathBuf::from(file),
                marker: marker.to_owned(),
            }
        })?;
        edited.push((file.to_owned(), text));
    }
    // The traits the lines above call, imported with the first kind that
    // needs them (a project made without a kind has neither).
    let mut imports = vec!["use opkit::ControllerWiring;"];
    if owned {
        imports.push("use kube::CustomResourceExt;");
    }
    if let Some((_, lib)) = edited.iter_mut().find(|(f, _)| f == "src/lib.rs") {
        // A project made without a kind names the parameter `_manager`
        // (unused until now); the first controller uses it.
        *lib = lib.replace(
            "add_controllers(_manager: &mut Manager)",
            "add_controllers(manager: &mut Manager)",
        );
        for import in imports {
            if lib.lines().any(|l| l.trim() == import) {
                continue;
            }
            *lib = insert_before_line(lib, IMPORT_ANCHOR, import).ok_or_else(|| {
                ScaffoldError::MissingMarker {
                    path: PathBuf::from("src/lib.rs"),
                    marker: IMPORT_ANCHOR.to_owned(),
                }
            })?;
        }
    }
    Ok((files, edited))
}

/// Inserts `line` before the first line equal to `anchor`.
fn insert_before_line(text: &str, anchor: &str, line: &str) -> Option<String> {
    insert_before_marker(text, anchor, line)
}

/// The groups of Kubernetes' own kinds that are not `*.k8s.io`.
const BUILTIN_PLAIN_GROUPS: &[&str] = &["core", "apps", "batch", "autoscaling", "policy"];

/// The `k8s_openapi` path of built-in `kind` in `group`/`version`, or
/// `None` if `group` is not one of Kubernetes' own.
fn builtin_path(group: &str, version: &str, kind: &str) -> Option<String> {
    let module = if group == "apiextensions.k8s.io" {
        return Some(format!(
            "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::{version}::{kind}"
        ));
    } else if group == "apiregistration.k8s.io" {
        return None;
    } else if BUILTIN_PLAIN_GROUPS.contains(&group) {
        group
    } else {
        let stem = group.strip_suffix(".k8s.io")?;
        stem.split('.').next()?
    };
    Some(format!("k8s_openapi::api::{module}::{version}::{kind}"))
}

/// Whether `path` is a Rust path of a type: `crate::a::B`, `some_crate::B`.
fn is_rust_path(path: &str) -> bool {
    let ident = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    path.split("::").all(ident) && path.contains("::")
}

impl CreateApi {
    /// Checks the flags against each other and against the project.
    fn spec(&self, project: &ProjectFile) -> Result<ApiSpec, ScaffoldError> {
        let bad = |reason: String| ScaffoldError::Flags { reason };
        if self.external_api_domain.is_some() && self.external_api_path.is_none() {
            return Err(bad(
                "--external-api-domain needs --external-api-path (the Rust path of the type)"
                    .to_owned(),
            ));
        }
        if self.resource {
            if self.external_api_path.is_some() {
                return Err(bad(
                    "--external-api-path names a type the project does not define: add --resource=false".to_owned(),
                ));
            }
            let group = self.group.clone().unwrap_or_else(|| project.group.clone());
            validate_group(&group)?;
            let version = self
                .version
                .clone()
                .unwrap_or_else(|| project.version.clone());
            validate_version(&version)?;
            return Ok(ApiSpec {
                kind: self.kind.clone(),
                group,
                version,
                namespaced: self.namespaced,
                external: None,
                domain: None,
            });
        }
        if !self.namespaced {
            return Err(bad(format!(
                "--namespaced=false sets the scope of a CRD the project defines; with --resource=false \
                 {} keeps the scope its type declares: drop --namespaced=false",
                self.kind
            )));
        }
        let (Some(group), Some(version)) = (&self.group, &self.version) else {
            return Err(bad(
                "--resource=false needs the kind's own --group and --version \
                 (e.g. --group apps --version v1 --kind Deployment; --group core for Pod, ConfigMap..)"
                    .to_owned(),
            ));
        };
        validate_version(version)?;
        let external = match &self.external_api_path {
            Some(path) => {
                if !is_rust_path(path) {
                    return Err(bad(format!(
                        "--external-api-path {path:?} is not a Rust path of a type \
                         (e.g. crate::external::Certificate or some_crate::v1::Certificate)"
                    )));
                }
                if path.rsplit("::").next() != Some(self.kind.as_str()) {
                    return Err(bad(format!(
                        "--external-api-path {path} does not end in the kind {}: \
                         name the type itself (…::{})",
                        self.kind, self.kind
                    )));
                }
                if group.is_empty() || group.split('.').any(str::is_empty) {
                    return Err(ScaffoldError::InvalidGroup {
                        group: group.clone(),
                        reason: "expected the kind's API group, e.g. cert-manager.io".to_owned(),
                    });
                }
                path.clone()
            }
            None => builtin_path(group, version, &self.kind).ok_or_else(|| {
                bad(format!(
                    "{group} is not a group of Kubernetes' built-in kinds: for a kind defined \
                     elsewhere, pass --external-api-path with the Rust path of its type \
                     (e.g. crate::external::{})",
                    self.kind
                ))
            })?,
        };
        Ok(ApiSpec {
            kind: self.kind.clone(),
            group: group.clone(),
            version: version.clone(),
            namespaced: true,
            external: Some(external),
            domain: self.external_api_domain.clone(),
        })
    }

    /// Finds the project holding `dir` ([`find_project`]), validates, then
    /// adds the kind's files and registers it in
    /// `src/api/mod.rs`, `src/controllers/mod.rs`, `src/lib.rs` and
    /// `PROJECT`. Every check (markers included) runs before the first
    /// write. Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, ScaffoldError> {
        validate_kind(&self.kind)?;
        if let Some(version) = &self.version {
            validate_version(version)?;
        }
        if let Some(group) = &self.group
            && self.resource
        {
            validate_group(group)?;
        }
        let dir = find_project(&self.dir)?;
        let mut project = ProjectFile::read(&dir)?;
        if project.resource(&self.kind).is_some() {
            return Err(ScaffoldError::KindExists {
                kind: self.kind.clone(),
            });
        }
        let spec = self.spec(&project)?;
        let (files, edited) =
            plan_api(&spec, &project, |file| read(&dir.join(file))).map_err(|e| match e {
                ScaffoldError::MissingMarker { path, marker } => ScaffoldError::MissingMarker {
                    path: dir.join(path),
                    marker,
                },
                e => e,
            })?;
        for (path, _) in &files {
            let path = dir.join(path);
            if path.exists() {
                return Err(ScaffoldError::Exists { path });
            }
        }
        let mut edited = edited;
        project.resources.push(spec.into_resource());
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

/// The `PROJECT` file: what `create api`, `create webhook` and
/// `manifests` need to know. Like kubebuilder's, it lists every resource
/// with its own group and version, so kinds of several groups survive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    /// The project (crate and binary) name.
    pub name: String,
    /// The default API group of `create api`.
    pub group: String,
    /// The default API version of `create api`.
    pub version: String,
    /// The kinds, in the order they were added.
    pub resources: Vec<ProjectResource>,
}

/// One kind of a project: its own API type, or (with `external`) a kind
/// the project reconciles but does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectResource {
    /// The kind.
    pub kind: String,
    /// Its API group (`core` for the core group).
    pub group: String,
    /// Its API version.
    pub version: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// For a kind the project does not define (`create api
    /// --resource=false`): the Rust path of its type.
    pub external: Option<String>,
    /// The domain given with `--external-api-domain`, if any.
    pub domain: Option<String>,
}

impl ProjectResource {
    /// Whether the project defines the type (and its CRD).
    pub fn owned(&self) -> bool {
        self.external.is_none()
    }
}

impl ProjectFile {
    /// Reads `dir/PROJECT`. Also reads the first format (a `kinds:` line,
    /// every kind in the project's group and version); the next write
    /// turns it into the current one.
    pub fn read(dir: &Path) -> Result<Self, ScaffoldError> {
        let path = dir.join("PROJECT");
        if !path.is_file() {
            return Err(ScaffoldError::NotAProject {
                path: dir.to_owned(),
            });
        }
        Self::parse(&read(&path)?).map_err(|detail| ScaffoldError::BadProjectFile { path, detail })
    }

    fn parse(text: &str) -> Result<Self, String> {
        let mut top: Vec<(String, String)> = Vec::new();
        let mut items: Vec<Vec<(String, String)>> = Vec::new();
        let mut in_resources = false;
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indented = line.starts_with(' ') || trimmed.starts_with('-');
            let (entry, starts_item) = match trimmed.strip_prefix('-') {
                Some(rest) => (rest.trim(), true),
                None => (trimmed, false),
            };
            let (key, value) = entry
                .split_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| format!("line {}: expected `key: value`", number + 1))?;
            if !indented {
                in_resources = key == "resources";
                top.push((key, value));
            } else if !in_resources {
                return Err(format!("line {}: unexpected indentation", number + 1));
            } else if starts_item {
                items.push(vec![(key, value)]);
            } else {
                items
                    .last_mut()
                    .ok_or_else(|| format!("line {}: expected `- kind: ..`", number + 1))?
                    .push((key, value));
            }
        }
        let find = |pairs: &[(String, String)], key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let need = |pairs: &[(String, String)], key: &str, what: &str| {
            find(pairs, key).ok_or_else(|| format!("no `{key}:` line{what}"))
        };
        let name = need(&top, "name", "")?;
        let group = need(&top, "group", "")?;
        let version = need(&top, "version", "")?;
        let mut resources = Vec::new();
        if let Some(kinds) = find(&top, "kinds") {
            // The first format: every kind in the project's group.
            for kind in kinds.split(',').map(str::trim).filter(|k| !k.is_empty()) {
                resources.push(ProjectResource {
                    kind: kind.to_owned(),
                    group: group.clone(),
                    version: version.clone(),
                    namespaced: true,
                    external: None,
                    domain: None,
                });
            }
        }
        for item in &items {
            let kind = need(item, "kind", " in a resource")?;
            let what = format!(" in resource {kind}");
            let namespaced = match find(item, "namespaced").as_deref() {
                None | Some("true") => true,
                Some("false") => false,
                Some(other) => {
                    return Err(format!("namespaced: {other}{what}: expected true or false"));
                }
            };
            resources.push(ProjectResource {
                group: need(item, "group", &what)?,
                version: need(item, "version", &what)?,
                kind,
                namespaced,
                external: find(item, "external"),
                domain: find(item, "domain"),
            });
        }
        Ok(Self {
            name,
            group,
            version,
            resources,
        })
    }

    /// The kinds, in the order they were added.
    pub fn kinds(&self) -> Vec<&str> {
        self.resources.iter().map(|r| r.kind.as_str()).collect()
    }

    /// The resource of `kind`, if the project has it.
    pub fn resource(&self, kind: &str) -> Option<&ProjectResource> {
        self.resources.iter().find(|r| r.kind == kind)
    }

    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "# Written by `cargo opkit`, read by `cargo opkit create api`, `create webhook` and `manifests`.\n\
             name: {}\ngroup: {}\nversion: {}\nresources:",
            self.name, self.group, self.version
        );
        if self.resources.is_empty() {
            out.push_str(" []");
        }
        out.push('\n');
        for r in &self.resources {
            out.push_str(&format!(
                "- kind: {}\n  group: {}\n  version: {}\n  namespaced: {}\n",
                r.kind, r.group, r.version, r.namespaced
            ));
            if let Some(external) = &r.external {
                out.push_str(&format!("  external: {external}\n"));
            }
            if let Some(domain) = &r.domain {
                out.push_str(&format!("  domain: {domain}\n"));
            }
        }
        out
    }
}

/// The project directory holding `start`: the nearest ancestor (or
/// `start` itself) with a `PROJECT` file next to a `Cargo.toml`, as cargo
/// finds its manifest from any subdirectory.
pub fn find_project(start: &Path) -> Result<PathBuf, ScaffoldError> {
    let start = std::path::absolute(start).map_err(|source| ScaffoldError::Io {
        path: start.to_owned(),
        source,
    })?;
    start
        .ancestors()
        .find(|dir| dir.join("PROJECT").is_file() && dir.join("Cargo.toml").is_file())
        .map(Path::to_owned)
        .ok_or(ScaffoldError::NotAProject { path: start })
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

/// The project's `.cargo/config.toml`: `target` as cargo's target
/// directory, so a plain `cargo build` and rust-analyzer build where `make`
/// and `cargo opkit` do (the generated Makefile's `CARGO_TARGET_DIR`
/// default is the same directory).
fn cargo_config(target: &Path) -> String {
    format!(
        "# Where plain `cargo` and rust-analyzer build this project: the target\n\
         # directory shared by your opkit projects, where `cargo opkit new` built\n\
         # it and where `make` builds (its CARGO_TARGET_DIR), so dependencies\n\
         # compile once. It names a directory of this machine, so git ignores\n\
         # this file; delete it (or set CARGO_TARGET_DIR) to build in ./target.\n\
         [build]\n\
         target-dir = {}\n",
        toml_string(&target.to_string_lossy())
    )
}

/// `cargo opkit manifests`: builds the project in `dir` (or the project
/// holding it, see [`find_project`]) and runs its binary's `manifests`
/// command, which renders the CRDs and RBAC rules from the code into
/// `deploy/`. Cargo's progress and errors go to stderr as the build runs;
/// the binary's report (the files written) goes to stdout. Builds in
/// [`shared_target_dir`].
pub fn manifests(dir: &Path) -> Result<(), ScaffoldError> {
    manifests_in(&find_project(dir)?)
}

/// [`manifests`] in exactly `dir`.
fn manifests_in(dir: &Path) -> Result<(), ScaffoldError> {
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
    let status = command.status().map_err(|e| ScaffoldError::Manifests {
        detail: format!("cannot run cargo: {e}"),
    })?;
    if !status.success() {
        return Err(ScaffoldError::Manifests {
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

/// The placeholders `--sharding` fills: empty (and one leader-elected
/// replica) without it, so the default project does not change.
fn sharding_values(values: &mut Values, name: &str, sharding: bool) {
    let crate_name = name.replace('-', "_");
    if !sharding {
        values
            .set("sharding_arg", "")
            .set("sharding_setup", "")
            .set("sharding_const", "")
            .set("sharding_rbac", "")
            .set("replicas", "1")
            .set("manager_mode_arg", "--leader-elect");
        return;
    }
    values
        .set(
            "sharding_arg",
            r#"    /// Split the objects across the replicas: each reconciles only its share, none reconciles
    /// an object another one is reconciling (excludes --leader-elect; see `opkit::shard`).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, conflicts_with = "leader_elect")]
    sharding: bool,
"#,
        )
        .set(
            "sharding_setup",
            format!(
                r#"    if args.sharding {{
        // Each replica holds a Lease in the operator's namespace; the ring
        // needs no configuration when replicas come and go. When the objects
        // spread over many more namespaces than replicas, add
        // `.by_namespace()`: each replica then caches only its namespaces
        // (server-side with the ShardedListAndWatch feature gate, else by a
        // shard label the replicas set, which needs `patch` on the kind).
        builder = builder.sharding(opkit::shard::Sharding::new({crate_name}::SHARD_RING));
    }}
"#
            ),
        )
        .set(
            "sharding_const",
            format!(
                "/// The shard ring the replicas split the objects on (`--sharding`).\n\
                 pub const SHARD_RING: &str = \"{name}\";\n"
            ),
        )
        .set("sharding_rbac", "        .sharding()\n")
        .set("replicas", "3")
        .set("manager_mode_arg", "--sharding");
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

fn write_tree(root: &Path, files: &[(String, String)]) -> Result<(), ScaffoldError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn project(dir: &Path) -> NewProject {
        NewProject {
            name: "demo-operator".into(),
            group: "demo.example.com".into(),
            version: "v1".into(),
            kind: Some("Widget".into()),
            dir: Some(dir.to_owned()),
            opkit: OpkitDependency::Version("0.1".into()),
            sharding: false,
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
        // The end-to-end job: a kind cluster with a registry the image is
        // pushed to, then `make test-e2e` naming that image.
        let e2e = &workflow.jobs["test-e2e"];
        assert!(
            e2e.steps
                .iter()
                .all(|s| s.uses.is_some() != s.run.is_some())
        );
        assert!(
            e2e.steps
                .iter()
                .any(|s| s.uses.as_deref() == Some("helm/kind-action@v1"))
        );
        assert!(
            e2e.steps
                .iter()
                .filter_map(|s| s.run.as_deref())
                .any(|r| r.starts_with(
                    "KUBECONFIG=\"$HOME/.kube/config\" make test-e2e IMG=localhost:5000/demo-operator:e2e"
                )),
            "{:?}",
            e2e.steps
                .iter()
                .filter_map(|s| s.run.as_deref())
                .collect::<Vec<_>>()
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
        bad.kind = Some("widget".into());
        assert!(matches!(
            bad.create(),
            Err(ScaffoldError::InvalidKind { .. })
        ));
        let mut bad = project(tmp.path());
        bad.group = "nodots".into();
        assert!(matches!(
            bad.create(),
            Err(ScaffoldError::InvalidGroup { .. })
        ));
        let mut bad = project(tmp.path());
        bad.opkit = OpkitDependency::Path(tmp.path().join("nowhere"));
        assert!(matches!(bad.create(), Err(ScaffoldError::Io { .. })));
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
            version: Some("v1beta1".into()),
            group: None,
            ..CreateApi::new(dir.clone(), "GuestBook")
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
        assert_eq!(project.kinds(), ["Widget", "GuestBook"]);

        assert!(matches!(
            api.create(),
            Err(ScaffoldError::KindExists { .. })
        ));
        let before = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        std::fs::write(dir.join("src/api/mod.rs"), "pub mod widget;\n").unwrap();
        let err = CreateApi {
            version: None,
            group: None,
            ..CreateApi::new(dir.clone(), "Gadget")
        }
        .create()
        .unwrap_err();
        assert!(matches!(err, ScaffoldError::MissingMarker { .. }), "{err}");
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
            version: None,
            group: Some("other.example.org".into()),
            ..CreateApi::new(dir.join("src/controllers"), "Gadget")
        }
        .create()
        .unwrap();
        assert!(
            changed.contains(&dir.join("src/api/gadget.rs")),
            "{changed:?}"
        );
        let types = std::fs::read_to_string(dir.join("src/api/gadget.rs")).unwrap();
        assert!(types.contains("group = \"other.example.org\""), "{types}");
        assert_eq!(
            ProjectFile::read(&dir).unwrap().kinds(),
            ["Widget", "Gadget"]
        );
        assert_eq!(find_project(&dir.join("src/api")).unwrap(), dir);

        let err = CreateApi {
            version: None,
            group: Some("nodots".into()),
            ..CreateApi::new(dir.clone(), "Gizmo")
        }
        .create()
        .unwrap_err();
        assert!(matches!(err, ScaffoldError::InvalidGroup { .. }), "{err}");
        assert!(!dir.join("src/api/gizmo.rs").exists());
    }

    /// Issue 22: a second group used to be lost (`kinds:` had no group),
    /// so `create webhook` and later commands put the kind in the
    /// project's group. Each kind now keeps its group, version and scope
    /// through any number of rewrites.
    #[test]
    fn two_groups_survive_a_round_trip_and_a_third_create_api() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        CreateApi {
            group: Some("other.example.org".into()),
            version: Some("v2".into()),
            namespaced: false,
            ..CreateApi::new(dir.clone(), "Gadget")
        }
        .create()
        .unwrap();
        let first = ProjectFile::read(&dir).unwrap();
        assert_eq!(ProjectFile::parse(&first.render()).unwrap(), first);
        CreateApi::new(dir.clone(), "Gizmo").create().unwrap();
        let project = ProjectFile::read(&dir).unwrap();
        let groups: Vec<(&str, &str, &str, bool)> = project
            .resources
            .iter()
            .map(|r| {
                (
                    r.kind.as_str(),
                    r.group.as_str(),
                    r.version.as_str(),
                    r.namespaced,
                )
            })
            .collect();
        assert_eq!(
            groups,
            [
                ("Widget", "demo.example.com", "v1", true),
                ("Gadget", "other.example.org", "v2", false),
                ("Gizmo", "demo.example.com", "v1", true),
            ]
        );
        // The first format still reads (examples/memcached has it).
        let old = "name: a\ngroup: a.example.com\nversion: v1\nkinds: A, B\n";
        let old = ProjectFile::parse(old).unwrap();
        assert_eq!(old.kinds(), ["A", "B"]);
        assert!(
            old.resources
                .iter()
                .all(|r| r.group == "a.example.com" && r.namespaced)
        );
    }

    #[test]
    fn a_cluster_scoped_kind_has_no_namespace_anywhere() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        CreateApi {
            namespaced: false,
            ..CreateApi::new(dir.clone(), "Zone")
        }
        .create()
        .unwrap();
        let types = std::fs::read_to_string(dir.join("src/api/zone.rs")).unwrap();
        assert!(types.contains("kind = \"Zone\",\n    status"), "{types}");
        assert!(!types.contains("namespaced"), "{types}");
        let sample = std::fs::read_to_string(dir.join("samples/zone.yaml")).unwrap();
        assert!(!sample.contains("namespace"), "{sample}");
        let test = std::fs::read_to_string(dir.join("tests/zone_controller.rs")).unwrap();
        assert!(test.contains("Api::all(client.clone())"), "{test}");
        let widget = std::fs::read_to_string(dir.join("src/api/widget.rs")).unwrap();
        assert!(widget.contains("    namespaced,\n"), "{widget}");
    }

    #[test]
    fn resource_false_scaffolds_only_a_controller() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        let changed = CreateApi {
            group: Some("apps".into()),
            version: Some("v1".into()),
            resource: false,
            ..CreateApi::new(dir.clone(), "Deployment")
        }
        .create()
        .unwrap();
        assert!(
            !changed.iter().any(|p| p.starts_with(dir.join("src/api"))),
            "{changed:?}"
        );
        assert!(!dir.join("tests/deployment_controller.rs").exists());
        assert!(!dir.join("samples/deployment.yaml").exists());
        let controller =
            std::fs::read_to_string(dir.join("src/controllers/deployment.rs")).unwrap();
        assert!(
            controller.contains("use k8s_openapi::api::apps::v1::Deployment;"),
            "{controller}"
        );
        assert!(!controller.contains("finalizer(") && !controller.contains("patch_status"));
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("controllers::deployment::DeploymentReconciler.add_to(manager)?;"));
        assert!(!lib.contains("Deployment::crd()"), "{lib}");

        CreateApi {
            group: Some("cert-manager.io".into()),
            version: Some("v1".into()),
            resource: false,
            external_api_path: Some("crate::external::Certificate".into()),
            external_api_domain: Some("cert-manager.io".into()),
            ..CreateApi::new(dir.clone(), "Certificate")
        }
        .create()
        .unwrap();
        let controller =
            std::fs::read_to_string(dir.join("src/controllers/certificate.rs")).unwrap();
        assert!(
            controller.contains("use crate::external::Certificate;"),
            "{controller}"
        );
        let project = ProjectFile::read(&dir).unwrap();
        let certificate = project.resource("Certificate").unwrap();
        assert_eq!(
            certificate.external.as_deref(),
            Some("crate::external::Certificate")
        );
        assert_eq!(certificate.domain.as_deref(), Some("cert-manager.io"));
        assert_eq!(
            project.resource("Deployment").unwrap().external.as_deref(),
            Some("k8s_openapi::api::apps::v1::Deployment")
        );
        assert_eq!(ProjectFile::parse(&project.render()).unwrap(), project);

        let webhook = crate::CreateWebhook {
            dir: dir.clone(),
            kind: "Deployment".into(),
            conversion_spoke: None,
        }
        .create()
        .unwrap_err();
        assert!(
            webhook.to_string().contains("does not define it"),
            "{webhook}"
        );
    }

    #[test]
    fn flags_that_do_not_go_together_are_refused_before_any_write() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = project(tmp.path()).create().unwrap();
        let before = std::fs::read_to_string(dir.join("PROJECT")).unwrap();
        let builtin = |kind: &str| CreateApi {
            group: Some("apps".into()),
            version: Some("v1".into()),
            resource: false,
            ..CreateApi::new(dir.clone(), kind)
        };
        let cases = [
            (
                CreateApi {
                    namespaced: false,
                    ..builtin("Deployment")
                },
                "drop --namespaced=false",
            ),
            (
                CreateApi {
                    group: None,
                    ..builtin("Deployment")
                },
                "needs the kind's own --group and --version",
            ),
            (
                CreateApi {
                    group: Some("cert-manager.io".into()),
                    ..builtin("Certificate")
                },
                "not a group of Kubernetes' built-in kinds",
            ),
            (
                CreateApi {
                    external_api_path: Some("crate::external::Certificate".into()),
                    ..CreateApi::new(dir.clone(), "Certificate")
                },
                "add --resource=false",
            ),
            (
                CreateApi {
                    external_api_path: Some("crate::external::Cert".into()),
                    ..builtin("Certificate")
                },
                "does not end in the kind Certificate",
            ),
            (
                CreateApi {
                    external_api_path: Some("not a path".into()),
                    ..builtin("Certificate")
                },
                "is not a Rust path",
            ),
            (
                CreateApi {
                    external_api_domain: Some("cert-manager.io".into()),
                    ..builtin("Deployment")
                },
                "--external-api-domain needs --external-api-path",
            ),
            (
                CreateApi {
                    group: Some("apps".into()),
                    ..CreateApi::new(dir.clone(), "Gadget")
                },
                "invalid API group \"apps\"",
            ),
        ];
        for (api, expected) in cases {
            let err = api.create().unwrap_err().to_string();
            assert!(err.contains(expected), "{api:?}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("PROJECT")).unwrap(),
            before
        );
        assert!(!dir.join("src/controllers/deployment.rs").exists());
    }

    #[test]
    fn new_without_a_kind_then_create_api_adds_the_first() {
        let tmp = tempfile::tempdir().unwrap();
        let mut new = project(tmp.path());
        new.kind = None;
        let dir = new.create().unwrap();
        assert!(!dir.join("src/api/widget.rs").exists());
        assert!(!dir.join("samples").exists());
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            !lib.contains("ControllerWiring") && !lib.contains("CustomResourceExt"),
            "{lib}"
        );
        // No controller uses the manager yet: no unused-variable warning.
        assert!(
            lib.contains("add_controllers(_manager: &mut Manager)"),
            "{lib}"
        );
        assert!(ProjectFile::read(&dir).unwrap().resources.is_empty());
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("description = \"A Kubernetes operator, built with opkit.\""));

        CreateApi::new(dir.clone(), "Widget").create().unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("use opkit::ControllerWiring;")
                && lib.contains("use kube::CustomResourceExt;"),
            "{lib}"
        );
        assert!(lib.contains("api::widget::Widget::crd(),"), "{lib}");
        assert!(
            lib.contains("add_controllers(manager: &mut Manager)"),
            "{lib}"
        );
        // Same code as a project made with the kind (but for the doc lines
        // naming it).
        let other = tmp.path().join("with");
        std::fs::create_dir(&other).unwrap();
        let made_with = project(&other).create().unwrap();
        let tail = |dir: &Path| {
            let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
            lib.split_once('\n').unwrap().1.to_owned()
        };
        assert_eq!(tail(&dir), tail(&made_with));
    }

    #[test]
    fn built_in_kinds_map_to_their_k8s_openapi_types() {
        for (group, version, kind, path) in [
            (
                "core",
                "v1",
                "ConfigMap",
                "k8s_openapi::api::core::v1::ConfigMap",
            ),
            (
                "apps",
                "v1",
                "Deployment",
                "k8s_openapi::api::apps::v1::Deployment",
            ),
            (
                "batch",
                "v1",
                "CronJob",
                "k8s_openapi::api::batch::v1::CronJob",
            ),
            (
                "networking.k8s.io",
                "v1",
                "Ingress",
                "k8s_openapi::api::networking::v1::Ingress",
            ),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "Role",
                "k8s_openapi::api::rbac::v1::Role",
            ),
            (
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition",
            ),
        ] {
            assert_eq!(builtin_path(group, version, kind).as_deref(), Some(path));
        }
        for group in ["cert-manager.io", "example.com", "apiregistration.k8s.io"] {
            assert_eq!(builtin_path(group, "v1", "Thing"), None, "{group}");
        }
        assert!(is_rust_path("crate::external::Certificate"));
        assert!(!is_rust_path("Certificate") && !is_rust_path("crate::a b::C"));
    }

    #[test]
    fn create_api_outside_a_project_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = CreateApi {
            version: None,
            group: None,
            ..CreateApi::new(tmp.path().to_owned(), "Gadget")
        }
        .create()
        .unwrap_err();
        assert!(
            err.to_string().contains("not inside an opkit project"),
            "{err}"
        );
    }
}
