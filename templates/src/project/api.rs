//! [`CreateApi`]: `cargo opkit create api`, another kind and its
//! controller in a project (also the first kind `new` writes).

use std::path::{Path, PathBuf};

use super::all_or_nothing::write_all_or_nothing;
use super::external_module::plan_modules;
use super::files::{insert_before_marker, kind_values, read, render_set};
use super::manifests::manifests_in;
use super::project_file::{ProjectFile, ProjectResource, find_project};
use crate::builtin_kinds::{builtin_kind, is_builtin_group};
use crate::error::ScaffoldError;
use crate::names::{snake_case, validate_group, validate_kind, validate_version};
use crate::templates;

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
pub(super) struct ApiSpec {
    pub(super) kind: String,
    pub(super) group: String,
    pub(super) version: String,
    pub(super) namespaced: bool,
    /// The Rust path of the type, for a kind the project does not define.
    pub(super) external: Option<String>,
    pub(super) domain: Option<String>,
}

impl ApiSpec {
    pub(super) fn into_resource(self) -> ProjectResource {
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

/// The marker of `src/lib.rs`'s `test_crds` where an external kind's CRD goes.
const EXTERNAL_CRDS: &str = "// opkit:scaffold:external-crds";

/// The line of `src/lib.rs` the trait imports `create api` needs go
/// before (rustfmt sorts them into place).
const IMPORT_ANCHOR: &str = "use opkit::manager::{Manager, ManagerError};";

/// The files a kind adds (path, text) and the files it changes (path, new
/// text), the latter read with `read` (relative paths). Checks every
/// marker; writes nothing.
pub(super) fn plan_api(
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
    super::multicluster::api_values(&mut values, project.multicluster.is_some());
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
    // A kind of another project: its CRD for the tests (a built-in kind
    // needs none). A project made before `test_crds` has no marker for it.
    let external_crd = match spec.external.as_deref() {
        Some(path) if !path.starts_with("k8s_openapi::") => {
            read("src/lib.rs")?.contains(EXTERNAL_CRDS).then_some(path)
        }
        _ => None,
    };
    if let Some(path) = external_crd {
        edits.push(("src/lib.rs", EXTERNAL_CRDS, format!("{path}::crd(),")));
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
    if owned || external_crd.is_some() {
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

/// Whether `path` is a Rust path of a type: `crate::a::B`, `some_crate::B`.
pub(super) fn is_rust_path(path: &str) -> bool {
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
            None if !is_builtin_group(group) => {
                return Err(bad(format!(
                    "{group} is not a group of Kubernetes' built-in kinds: for a kind defined \
                     elsewhere, pass --external-api-path with the Rust path of its type \
                     (e.g. crate::external::{})",
                    self.kind
                )));
            }
            None => builtin_kind(group, version, &self.kind)
                .map_err(bad)?
                .path
                .to_owned(),
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
    /// write; if writing or formatting fails, the project is left as it was
    /// ([`ScaffoldError::RolledBack`]). Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, ScaffoldError> {
        self.create_then(|_| Ok(()))
    }

    /// As [`create`](Self::create), then builds the project to render its
    /// manifests ([`manifests`](crate::manifests)); if the build fails (a
    /// misspelt external type, a compile error), everything `create` wrote
    /// is undone, as `new` leaves nothing behind.
    pub fn create_with_manifests(&self) -> Result<Vec<PathBuf>, ScaffoldError> {
        self.create_then(manifests_in)
    }

    /// [`create`](Self::create), then `finish` on the project's directory;
    /// undone if `finish` fails.
    pub(super) fn create_then(
        &self,
        finish: impl FnOnce(&Path) -> Result<(), ScaffoldError>,
    ) -> Result<Vec<PathBuf>, ScaffoldError> {
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
        let (mut files, mut edited) = plan_api(&spec, &project, |file| read(&dir.join(file)))
            .map_err(|e| match e {
                ScaffoldError::MissingMarker { path, marker } => ScaffoldError::MissingMarker {
                    path: dir.join(path),
                    marker,
                },
                e => e,
            })?;
        if let Some(path) = &spec.external {
            let (modules, declared) = plan_modules(&dir, path, |file| {
                match edited.iter().find(|(f, _)| f == file) {
                    Some((_, text)) => Ok(Some(text.clone())),
                    None if dir.join(file).is_file() => read(&dir.join(file)).map(Some),
                    None => Ok(None),
                }
            })?;
            files.extend(modules);
            for (file, text) in declared {
                match edited.iter_mut().find(|(f, _)| *f == file) {
                    Some(slot) => slot.1 = text,
                    None => edited.push((file, text)),
                }
            }
        }
        for (path, _) in &files {
            let path = dir.join(path);
            if path.exists() {
                return Err(ScaffoldError::Exists { path });
            }
        }
        project.resources.push(spec.into_resource());
        edited.push(("PROJECT".to_owned(), project.render()));

        write_all_or_nothing(&dir, &files, &edited, finish)
    }
}
