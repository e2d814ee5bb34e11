//! The run's footprint file: when `OPKIT_RUN_DIR` is set, every process,
//! directory, link and cgroup envtest makes is listed in
//! `$OPKIT_RUN_DIR/footprint`, so a check after the tests (`make
//! check-orphans`) judges exactly what this run started, and nothing that
//! another run (or a `make cluster` in another terminal) owns.
//!
//! Lines: `process PID START_TIME NAME`, `dir PATH`, `link NAME`,
//! `cgroup NAME` (START_TIME is field 22 of `/proc/PID/stat`, so a reused
//! PID is not mistaken for ours).

use std::io::Write;
use std::path::Path;

/// Appends one line to the footprint file, if the run keeps one.
pub(crate) fn record(line: &str) {
    let Some(dir) = std::env::var_os("OPKIT_RUN_DIR").filter(|d| !d.is_empty()) else {
        return;
    };
    let path = Path::new(&dir).join("footprint");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(error) = written {
        tracing::warn!(path = %path.display(), %error, "could not record in the run's footprint");
    }
}

/// Records a process by PID and start time.
pub(crate) fn record_process(pid: u32, name: &str) {
    if let Some(start) = start_time(pid) {
        record(&format!("process {pid} {start} {name}"));
    }
}

/// The start time of a process (clock ticks since boot), if it runs: a
/// zombie (exited, not yet reaped by whoever inherited it) does not.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields resume after its last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next(), Some("Z" | "X" | "x")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Whether the process that had `start` as its start time still runs.
pub(crate) fn still_running(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_stable() {
        let me = std::process::id();
        let start = start_time(me).unwrap();
        assert!(still_running(me, start));
        assert!(!still_running(me, start + 1));
    }
}
