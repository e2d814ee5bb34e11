//! Finding the etcd and kube-apiserver binaries.

use std::env;
use std::path::{Path, PathBuf};

use super::error::{EnvtestError, Result};

/// The Kubernetes release the repository's `tests/controlplane` builds.
pub const DEFAULT_KUBERNETES_VERSION: &str = "v1.36.3";

/// The two binaries a control plane needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// Path to `etcd`.
    pub etcd: PathBuf,
    /// Path to `kube-apiserver`.
    pub kube_apiserver: PathBuf,
}

/// One place binaries are looked for, with a label saying where it came from.
#[derive(Debug, Clone)]
struct Candidate {
    label: String,
    dir: PathBuf,
    /// Set by the user through an environment variable.
    explicit: bool,
}

/// Where the binaries are looked for, in order:
/// `$KUBEBUILDER_ASSETS` (setup-envtest's layout), `$OPKIT_ASSETS`, then the
/// build cache `${OPKIT_CACHE:-$HOME/.cache/opkit}/controlplane/<version>/bin`.
fn candidates(version: &str) -> Vec<Candidate> {
    let mut out = Vec::new();
    for var in ["KUBEBUILDER_ASSETS", "OPKIT_ASSETS"] {
        if let Some(dir) = env::var_os(var).filter(|v| !v.is_empty()) {
            out.push(Candidate {
                label: format!("${var}"),
                dir: PathBuf::from(dir),
                explicit: true,
            });
        }
    }
    let cache = env::var_os("OPKIT_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cache").join("opkit")));
    if let Some(cache) = cache {
        out.push(Candidate {
            label: "the opkit build cache".to_owned(),
            dir: cache.join("controlplane").join(version).join("bin"),
            explicit: false,
        });
    }
    out
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Finds `etcd` and `kube-apiserver` for `version` (e.g. `v1.36.3`).
///
/// Both must come from the same directory: the first candidate holding both
/// wins. A set variable whose directory lacks a binary is an error, so a typo
/// in `KUBEBUILDER_ASSETS` is not hidden by a fallback.
pub fn find_binaries(version: &str) -> Result<Binaries> {
    find_in(&candidates(version))
}

fn find_in(candidates: &[Candidate]) -> Result<Binaries> {
    for c in candidates {
        let etcd = c.dir.join("etcd");
        let kube_apiserver = c.dir.join("kube-apiserver");
        let has_etcd = is_executable(&etcd);
        let has_apiserver = is_executable(&kube_apiserver);
        if has_etcd && has_apiserver {
            return Ok(Binaries {
                etcd,
                kube_apiserver,
            });
        }
        // A variable the user set must be complete: a typo is reported, not skipped.
        if c.explicit {
            return Err(EnvtestError::MissingBinary {
                binary: match (has_etcd, has_apiserver) {
                    (true, _) => "kube-apiserver",
                    (false, true) => "etcd",
                    (false, false) => "etcd and kube-apiserver",
                },
                searched: format!("{} = {}", c.label, c.dir.display()),
            });
        }
    }
    let missing = "etcd and kube-apiserver";
    let searched = if candidates.is_empty() {
        "nowhere ($HOME, KUBEBUILDER_ASSETS and OPKIT_ASSETS are all unset)".to_owned()
    } else {
        candidates
            .iter()
            .map(|c| format!("{} ({})", c.dir.display(), c.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(EnvtestError::MissingBinary {
        binary: missing,
        searched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(label: &str, dir: &Path) -> Candidate {
        Candidate {
            label: label.to_owned(),
            dir: dir.to_owned(),
            explicit: label.starts_with('$'),
        }
    }

    fn touch_executable(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn missing_everywhere_says_how_to_get_them() {
        let empty = tempfile::tempdir().unwrap();
        let err = find_in(&[candidate("the opkit build cache", empty.path())]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("etcd and kube-apiserver not found"), "{msg}");
        assert!(msg.contains(&empty.path().display().to_string()), "{msg}");
        assert!(msg.contains("make controlplane"), "{msg}");
        assert!(msg.contains("KUBEBUILDER_ASSETS"), "{msg}");
    }

    #[test]
    fn explicit_variable_missing_one_binary_is_reported() {
        let assets = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        touch_executable(&assets.path().join("etcd"));
        touch_executable(&cache.path().join("etcd"));
        touch_executable(&cache.path().join("kube-apiserver"));
        let err = find_in(&[
            candidate("$KUBEBUILDER_ASSETS", assets.path()),
            candidate("the opkit build cache", cache.path()),
        ])
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("kube-apiserver not found"), "{msg}");
        assert!(msg.contains("$KUBEBUILDER_ASSETS"), "{msg}");
    }

    #[test]
    fn first_complete_directory_wins() {
        let assets = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        for dir in [assets.path(), cache.path()] {
            touch_executable(&dir.join("etcd"));
            touch_executable(&dir.join("kube-apiserver"));
        }
        let found = find_in(&[
            candidate("$OPKIT_ASSETS", assets.path()),
            candidate("the opkit build cache", cache.path()),
        ])
        .unwrap();
        assert_eq!(found.etcd, assets.path().join("etcd"));
        assert_eq!(found.kube_apiserver, assets.path().join("kube-apiserver"));
    }

    #[test]
    fn non_executable_file_does_not_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("etcd"), b"").unwrap();
        std::fs::write(dir.path().join("kube-apiserver"), b"").unwrap();
        assert!(find_in(&[candidate("the opkit build cache", dir.path())]).is_err());
    }
}
