//! The node's own namespaces (PID, mount, network), the link that joins them
//! to the host, and the slot lease that keeps concurrent clusters apart.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{EnvtestError, Result};
use crate::footprint::{start_time, still_running};
use crate::process::ChildProcess;

/// How many clusters can run at once on one machine (one /24 each).
const SLOTS: u8 = 250;

/// Runs `program args...` to completion; a failure quotes its output.
pub(crate) fn run(step: &'static str, program: &str, args: &[String]) -> Result<String> {
    let output =
        Command::new(program)
            .args(args)
            .output()
            .map_err(|e| EnvtestError::NodeSetup {
                step,
                detail: format!("could not run {program}: {e}"),
            })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(EnvtestError::NodeSetup {
            step,
            detail: format!(
                "`{program} {}` {}: {}{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            ),
        })
    }
}

/// An exclusive lease on one slot number, held for the cluster's life by
/// binding the abstract Unix socket `opkit-cluster-slot-<n>` (exclusive
/// while bound, released by the kernel when the holder dies, and nothing on
/// any file system). The slot picks the cluster's link addresses, link name
/// and cgroup name, so whatever a crashed holder of the slot left behind can
/// be cleared safely.
#[derive(Debug)]
pub(crate) struct SlotLease {
    _socket: std::os::unix::net::UnixListener,
    index: u8,
}

impl SlotLease {
    /// Takes the first free slot.
    pub fn take() -> Result<Self> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        for index in 1..=SLOTS {
            let name = format!("opkit-cluster-slot-{index}");
            let address = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|source| {
                EnvtestError::Io {
                    what: "naming a cluster slot",
                    path: PathBuf::from(&name),
                    source,
                }
            })?;
            match UnixListener::bind_addr(&address) {
                Ok(socket) => {
                    return Ok(Self {
                        _socket: socket,
                        index,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(source) => {
                    return Err(EnvtestError::Io {
                        what: "taking a cluster slot",
                        path: PathBuf::from(name),
                        source,
                    });
                }
            }
        }
        Err(EnvtestError::Unsupported(format!(
            "all {SLOTS} cluster slots are taken (abstract sockets opkit-cluster-slot-N)"
        )))
    }

    /// The slot's number (1–250), which picks the cluster's address ranges.
    pub fn index(&self) -> u8 {
        self.index
    }

    /// The host's end of the node link, `198.18.<slot>.1` (RFC 2544's
    /// benchmarking range, which no real network routes).
    pub fn host_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.index, 1)
    }

    /// The node's end of the link, `198.18.<slot>.2`: the node's IP.
    pub fn node_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.index, 2)
    }

    /// The host-side name of the link.
    pub fn link_name(&self) -> String {
        format!("opkit-node{}", self.index)
    }

    /// The cgroup (in every hierarchy) that holds the node's pods.
    pub fn cgroup_name(&self) -> String {
        format!("opkit-cluster-{}", self.index)
    }
}

/// The node's PID, mount and network namespaces, held by the `pause`
/// program as their init. `unshare --kill-child` ties init to its parent,
/// which dies with the test process; when init dies the kernel kills every
/// process in the PID namespace (containerd, shims, containers, kubelet),
/// and the mount and network namespaces, with every mount, bridge, veth and
/// nftables rule in them, go with it.
#[derive(Debug)]
pub(crate) struct NodeNamespaces {
    holder: ChildProcess,
    init_pid: u32,
}

impl NodeNamespaces {
    /// Creates the namespaces, with `init` (the pause program) as PID 1.
    pub fn create(init: &Path, log: PathBuf, timeout: Duration) -> Result<Self> {
        let args = [
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--propagation",
            "private",
            "--net",
            "--",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain(std::iter::once(init.display().to_string()))
        .collect::<Vec<_>>();
        let holder = ChildProcess::spawn("unshare", Path::new("unshare"), &args, log)?;
        let begun = Instant::now();
        loop {
            if let Some(status) = holder.exit_status() {
                return Err(holder.exited_early(status));
            }
            if let Some(&init_pid) = children_of(holder.pid()).first() {
                return Ok(Self { holder, init_pid });
            }
            if begun.elapsed() > timeout {
                return Err(EnvtestError::NodeSetup {
                    step: "creating the node namespaces",
                    detail: format!("unshare started no init within {timeout:?}"),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The host PID of the namespaces' init.
    pub fn init_pid(&self) -> u32 {
        self.init_pid
    }

    /// `nsenter` arguments that run a program inside the namespaces.
    pub fn enter(&self, program: &Path, args: &[String]) -> Vec<String> {
        let mut out = vec![
            "-t".to_owned(),
            self.init_pid.to_string(),
            "--pid".to_owned(),
            "--net".to_owned(),
            "--mount".to_owned(),
            "--".to_owned(),
            program.display().to_string(),
        ];
        out.extend(args.iter().cloned());
        out
    }

    /// Runs a shell script inside the namespaces and waits for it.
    pub fn run_script(&self, step: &'static str, script: &str) -> Result<String> {
        let args = self.enter(Path::new("/bin/sh"), &["-ec".to_owned(), script.to_owned()]);
        run(step, "nsenter", &args)
    }

    /// Kills init and with it everything inside, then waits (bounded) until
    /// init has exited: the kernel lets it exit only once every process of
    /// the namespace has, which on a loaded machine with a node's worth of
    /// processes took more than ten seconds (a CI run's journeys found the
    /// `pause` init still there).
    pub fn destroy(&self, timeout: Duration) {
        let init_start = start_time(self.init_pid);
        self.holder.kill();
        let begun = Instant::now();
        let running = || init_start.is_some_and(|start| still_running(self.init_pid, start));
        while running() && begun.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
        if running() {
            tracing::warn!(
                pid = self.init_pid,
                ?timeout,
                "the node's init has not exited"
            );
        } else if begun.elapsed() > Duration::from_secs(5) {
            tracing::info!(pid = self.init_pid, elapsed = ?begun.elapsed(), "the node's processes took long to exit");
        }
    }
}

impl Drop for NodeNamespaces {
    fn drop(&mut self) {
        self.destroy(Duration::from_secs(120));
    }
}

/// The PIDs of a process's children (from `/proc/PID/task/PID/children`).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills a process run through `nsenter` (the program it forked inside the
/// PID namespace), then `nsenter` itself.
pub(crate) fn kill_entered(process: &ChildProcess) {
    for child in children_of(process.pid()) {
        #[allow(unsafe_code)]
        // SAFETY: kill(2) with a PID we just read; no memory is involved.
        unsafe {
            libc::kill(child as libc::pid_t, libc::SIGKILL);
        }
    }
    process.kill();
}

/// The veth pair between the host and the node's network namespace.
#[derive(Debug)]
pub(crate) struct NodeLink {
    name: String,
}

impl NodeLink {
    /// Creates the pair: `name` on the host with `host`/24, `eth0` in the
    /// node's namespace (addressed from inside). A link of the same name (left by a
    /// crashed earlier holder of the slot) is removed first.
    pub fn create(name: &str, namespaces: &NodeNamespaces, host: Ipv4Addr) -> Result<Self> {
        remove_link(name);
        let s = |v: &str| v.to_owned();
        run(
            "creating the node link",
            "ip",
            &[
                s("link"),
                s("add"),
                s(name),
                s("type"),
                s("veth"),
                s("peer"),
                s("name"),
                s("eth0"),
                s("netns"),
                namespaces.init_pid().to_string(),
            ],
        )?;
        let link = Self {
            name: name.to_owned(),
        };
        run(
            "addressing the host end of the node link",
            "ip",
            &[s("addr"), s("add"), format!("{host}/24"), s("dev"), s(name)],
        )?;
        run(
            "bringing up the host end of the node link",
            "ip",
            &[s("link"), s("set"), s(name), s("up")],
        )?;
        Ok(link)
    }
}

impl Drop for NodeLink {
    fn drop(&mut self) {
        remove_link(&self.name);
    }
}

/// Deletes a host link if it exists (its veth peer goes with it).
fn remove_link(name: &str) {
    if Path::new("/sys/class/net").join(name).exists() {
        let _ = Command::new("ip").args(["link", "del", name]).output();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_leases_are_exclusive_and_released_on_drop() {
        let first = SlotLease::take().unwrap();
        let second = SlotLease::take().unwrap();
        assert_ne!(first.host_address(), second.host_address());
        assert_ne!(first.link_name(), second.link_name());
        let freed = first.link_name();
        drop(first);
        let again = SlotLease::take().unwrap();
        assert_eq!(again.link_name(), freed, "the lowest free slot is reused");
        assert_eq!(
            again.node_address().octets()[..3],
            again.host_address().octets()[..3]
        );
    }
}
