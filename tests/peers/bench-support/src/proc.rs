//! A process's CPU time and memory from /proc, and the wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Which process to read: another one, or this one.
#[derive(Debug, Clone, Copy)]
pub enum Pid {
    /// The process with this id.
    Of(u32),
    /// The calling process (`/proc/self`).
    Me,
}

impl Pid {
    fn file(self, name: &str) -> String {
        match self {
            Pid::Of(pid) => format!("/proc/{pid}/{name}"),
            Pid::Me => format!("/proc/self/{name}"),
        }
    }
}

/// User + system CPU time of `pid` so far, in seconds (10 ms resolution);
/// NaN when it cannot be read.
pub fn cpu_secs(pid: Pid) -> f64 {
    const TICKS_PER_SEC: f64 = 100.0; // CLK_TCK on Linux
    std::fs::read_to_string(pid.file("stat"))
        .ok()
        .and_then(|s| {
            // fields 14 and 15 of stat; after the command's `)` is field 3
            let rest = s.rsplit_once(')')?.1.to_owned();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = f.get(11)?.parse().ok()?;
            let system: f64 = f.get(12)?.parse().ok()?;
            Some((user + system) / TICKS_PER_SEC)
        })
        .unwrap_or(f64::NAN)
}

/// A field of `pid`'s /proc status in KiB (`VmRSS`, `VmHWM`); NaN when it
/// cannot be read.
pub fn status_kib(pid: Pid, field: &str) -> f64 {
    std::fs::read_to_string(pid.file("status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(f64::NAN)
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_a_resident_set() {
        assert!(cpu_secs(Pid::Me) >= 0.0);
        assert!(status_kib(Pid::Me, "VmRSS") > 0.0);
        assert!(status_kib(Pid::Me, "VmNope").is_nan());
        assert!(cpu_secs(Pid::Of(u32::MAX)).is_nan());
        assert!(now_ns() > 0);
    }
}
