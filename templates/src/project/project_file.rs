//! [`ProjectFile`]: the `PROJECT` file, and finding the project a
//! directory is in.

use std::path::{Path, PathBuf};

use super::files::read;
use super::multicluster::ClusterProvider;
use crate::error::ScaffoldError;

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
    /// For a hub operator (`new --multicluster`): where its member clusters
    /// come from. Its kinds' controllers run in every member.
    pub multicluster: Option<ClusterProvider>,
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

    pub(super) fn parse(text: &str) -> Result<Self, String> {
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
        let multicluster = match find(&top, "multicluster") {
            Some(name) => Some(ClusterProvider::parse(&name).map_err(|e| e.to_string())?),
            None => None,
        };
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
            multicluster,
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
             name: {}\ngroup: {}\nversion: {}\n",
            self.name, self.group, self.version
        );
        if let Some(provider) = self.multicluster {
            out.push_str(&format!("multicluster: {}\n", provider.as_str()));
        }
        out.push_str("resources:");
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
