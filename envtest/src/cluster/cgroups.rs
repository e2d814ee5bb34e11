//! The node's cgroup: one directory of the same name in every mounted cgroup
//! hierarchy, the kubelet's `cgroupRoot`, under which every pod runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{EnvtestError, Result};

/// Where cgroup hierarchies are mounted.
const CGROUP_MOUNTS: &str = "/sys/fs/cgroup";

/// The node's cgroup directories, removed (after killing anything left in
/// them) on drop.
#[derive(Debug)]
pub(crate) struct NodeCgroups {
    name: String,
    dirs: Vec<PathBuf>,
}

/// Every hierarchy under `/sys/fs/cgroup` (or that directory itself when it
/// is a lone cgroup2 mount).
fn hierarchies() -> Vec<PathBuf> {
    let root = Path::new(CGROUP_MOUNTS);
    if root.join("cgroup.procs").exists() {
        return vec![root.to_owned()];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists() && !p.is_symlink())
        .collect();
    out.sort();
    out
}

impl NodeCgroups {
    /// Creates `/<name>` in every hierarchy, clearing what a crashed earlier
    /// holder of the same name left.
    pub fn create(name: &str) -> Result<Self> {
        let found = hierarchies();
        if found.is_empty() {
            return Err(EnvtestError::Unsupported(format!(
                "no cgroup hierarchy is mounted under {CGROUP_MOUNTS}"
            )));
        }
        let stale = Self {
            name: name.to_owned(),
            dirs: found.iter().map(|h| h.join(name)).collect(),
        };
        stale.remove(Duration::from_secs(10));
        std::mem::forget(stale);
        let mut made = Self {
            name: name.to_owned(),
            dirs: Vec::new(),
        };
        for hierarchy in found {
            let dir = hierarchy.join(name);
            std::fs::create_dir(&dir).map_err(|source| EnvtestError::Io {
                what: "creating the node's cgroup",
                path: dir.clone(),
                source,
            })?;
            made.dirs.push(dir.clone());
            // A new cpuset cgroup starts with no CPUs or memory nodes.
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(value) = std::fs::read_to_string(hierarchy.join(file)) {
                    let _ = std::fs::write(dir.join(file), value.trim());
                }
            }
        }
        Ok(made)
    }

    /// The cgroup path the kubelet takes as `cgroupRoot`.
    pub fn cgroup_root(&self) -> String {
        format!("/{}", self.name)
    }

    /// PIDs still in the node's cgroups.
    pub fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for dir in &self.dirs {
            collect_pids(dir, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Kills what is left inside and removes every directory, deepest first,
    /// retrying until `timeout` while the kernel finishes tearing down.
    fn remove(&self, timeout: Duration) {
        let begun = Instant::now();
        loop {
            for pid in self.pids() {
                #[allow(unsafe_code)]
                // SAFETY: kill(2) with a PID read from cgroup.procs.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
            let mut left = false;
            for dir in &self.dirs {
                left |= !remove_tree(dir);
            }
            if !left || begun.elapsed() > timeout {
                if left {
                    tracing::warn!(cgroup = %self.name, "could not remove every cgroup of the node");
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NodeCgroups {
    fn drop(&mut self) {
        self.remove(Duration::from_secs(10));
    }
}

fn collect_pids(dir: &Path, out: &mut Vec<u32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                collect_pids(&entry.path(), out);
            }
        }
    }
}

/// Removes a cgroup directory and its children; true when it is gone.
fn remove_tree(dir: &Path) -> bool {
    if !dir.exists() {
        return true;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree(&entry.path());
            }
        }
    }
    // cgroup directories are removed with rmdir even though they list files.
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}
