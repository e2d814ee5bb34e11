//! [`Footprint`]: everything one cluster started or made, to check that
//! stopping it removed all of it.

use std::path::{Path, PathBuf};

use super::network::Ipv4Cidr;
use super::routes::route_exists;
use crate::footprint::{record, record_process, start_time, still_running};

/// The processes, link, host routes, cgroups, directory and mounts of one
/// cluster.
#[derive(Debug, Clone)]
pub struct Footprint {
    dir: PathBuf,
    processes: Vec<(u32, u64)>,
    init: Option<u32>,
    pub(crate) link: Option<String>,
    pub(crate) cgroup: Option<String>,
    pub(crate) routes: Vec<Ipv4Cidr>,
}

impl Footprint {
    pub(crate) fn new(dir: PathBuf) -> Self {
        record(&format!("dir {}", dir.display()));
        Self {
            dir,
            processes: Vec::new(),
            init: None,
            link: None,
            cgroup: None,
            routes: Vec::new(),
        }
    }

    /// Notes a process of the cluster (recorded with its start time).
    pub(crate) fn add_process(&mut self, pid: u32) {
        if let Some(start) = start_time(pid) {
            self.processes.push((pid, start));
        }
    }

    /// Notes the node namespaces' init (not spawned by envtest directly).
    pub(crate) fn add_init(&mut self, pid: u32) {
        self.init = Some(pid);
        self.add_process(pid);
    }

    /// Writes the link and cgroup to the run's footprint file (processes
    /// spawned by envtest are recorded when spawned).
    pub(crate) fn record(&self) {
        if let Some(pid) = self.init {
            record_process(pid, "node-namespaces-init");
        }
        if let Some(link) = &self.link {
            record(&format!("link {link}"));
        }
        if let Some(cgroup) = &self.cgroup {
            record(&format!("cgroup {cgroup}"));
        }
        for range in &self.routes {
            record(&format!("route {range}"));
        }
    }

    /// What of it still exists, described one item per entry; empty once the
    /// cluster is fully stopped.
    pub fn remaining(&self) -> Vec<String> {
        let mut left = Vec::new();
        for &(pid, start) in &self.processes {
            if still_running(pid, start) {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                left.push(format!("process {pid} ({})", name.trim()));
            }
        }
        if let Some(link) = &self.link
            && Path::new("/sys/class/net").join(link).exists()
        {
            left.push(format!("network link {link}"));
        }
        for &range in &self.routes {
            if route_exists(range) {
                left.push(format!("host route {range}"));
            }
        }
        if let Some(cgroup) = &self.cgroup
            && let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup")
        {
            for entry in entries.flatten() {
                let dir = entry.path().join(cgroup);
                if dir.exists() {
                    left.push(format!("cgroup {}", dir.display()));
                }
            }
        }
        if self.dir.exists() {
            left.push(format!("directory {}", self.dir.display()));
        }
        let dir = self.dir.display().to_string();
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
            for line in mounts.lines().filter(|l| l.contains(&dir)) {
                left.push(format!("mount {line}"));
            }
        }
        left
    }
}
