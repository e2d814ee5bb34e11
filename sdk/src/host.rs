//! Facts about the host this process runs on, shared by the modules that
//! name this replica (leader election identities, Event reporting
//! instances) without depending on each other.

/// The host name of this machine or Pod, or `localhost` when it cannot be found.
pub(crate) fn hostname() -> String {
    let from_env = std::env::var("HOSTNAME").ok();
    let from_proc = || {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_owned())
    };
    from_env
        .filter(|h| !h.trim().is_empty())
        .or_else(from_proc)
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
