//! [`NewProject`]: `cargo opkit new`, a whole project written at once.

use std::path::{Path, PathBuf};

use super::api::{ApiSpec, plan_api};
use super::dependency::{OpkitDependency, toml_string};
use super::files::{format_rust, kind_values, render_set, write_tree};
use super::manifests::{manifests_in, shared_target_dir};
use super::multicluster::{ClusterProvider, project_values};
use super::project_file::ProjectFile;
use crate::error::ScaffoldError;
use crate::names::{validate_group, validate_kind, validate_name, validate_version};
use crate::render::Values;
use crate::templates;

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
    /// A hub operator whose kinds are reconciled in every member cluster
    /// this provider engages (see `opkit::multicluster`); recorded in the
    /// `PROJECT` file, so the kinds `create api` adds run in the members too.
    pub multicluster: Option<ClusterProvider>,
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
    /// (see [`manifests`](crate::manifests)) before moving it into place: if the build fails
    /// (opkit not found, a compile error), nothing is left behind.
    pub fn create_with_manifests(&self, lockfile: Option<&Path>) -> Result<PathBuf, ScaffoldError> {
        self.create_staged(lockfile, manifests_in)
    }

    /// Checks every input (names, where the project goes, where opkit is)
    /// without writing or building anything: what `cargo opkit new` runs
    /// before it says it builds.
    pub fn validate(&self) -> Result<(), ScaffoldError> {
        self.checked()?;
        self.opkit.lines(&[]).map(|_| ())
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
        let (dependency, dev_dependency) = self.opkit.lines(&crate::features::new_project(
            self.sharding,
            self.multicluster.is_some(),
        ))?;
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
        project_values(&mut values, self.multicluster)?;
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
            multicluster: self.multicluster,
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
