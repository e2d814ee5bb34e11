//! The `process_*` metrics of the Prometheus client libraries (what
//! controller-runtime exports through Go's process collector), read from
//! `/proc/self` at each scrape. On systems without `/proc` the collector
//! exports nothing.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::names::{self, counter_family};

/// The kernel's `USER_HZ`: the unit of the CPU times in `/proc/<pid>/stat`.
/// Fixed at 100 by the Linux ABI on every mainstream architecture (the
/// Prometheus Go client's procfs hard-codes it too).
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessStats {
    /// User plus system CPU time, in seconds.
    pub(crate) cpu_seconds: f64,
    /// Resident set size, in bytes.
    pub(crate) resident_memory_bytes: f64,
    /// Virtual memory size, in bytes.
    pub(crate) virtual_memory_bytes: f64,
    /// Open file descriptors.
    pub(crate) open_fds: Option<f64>,
    /// The soft limit on open file descriptors (`None`: unlimited or unknown).
    pub(crate) max_fds: Option<f64>,
    /// When the process started, in seconds since the Unix epoch.
    pub(crate) start_time_seconds: Option<f64>,
}

/// The fields of `/proc/<pid>/stat` the metrics need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses
/// and may itself hold spaces and parentheses: fields are counted from the
/// last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // after the name: field 3 (state) is index 0
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
    })
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes.
fn parse_status_rss(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The soft `Max open files` of `/proc/<pid>/limits` (`None` if unlimited).
fn parse_max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
fn parse_boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Reads the figures of this process from `/proc/self`; `None` where it
/// cannot (no `/proc`).
pub(crate) fn read() -> Option<ProcessStats> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let stat = parse_stat(&read("/proc/self/stat")?)?;
    let resident = read("/proc/self/status")
        .as_deref()
        .and_then(parse_status_rss)?;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|dir| dir.count() as f64);
    let max_fds = read("/proc/self/limits").as_deref().and_then(parse_max_fds);
    let start_time_seconds = read("/proc/stat")
        .as_deref()
        .and_then(parse_boot_time)
        .map(|boot| boot + stat.starttime as f64 / USER_HZ);
    Some(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / USER_HZ,
        resident_memory_bytes: resident,
        virtual_memory_bytes: stat.vsize as f64,
        open_fds,
        max_fds,
        start_time_seconds,
    })
}

/// Exports [`ProcessStats`] under the Prometheus client's names, read at
/// each scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(metric)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(stats) = read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(stats.cpu_seconds);
        let metric = encoder.encode_descriptor(
            counter_family(names::PROCESS_CPU_SECONDS_TOTAL),
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?;
        cpu.encode(metric)?;
        gauge(
            &mut encoder,
            names::PROCESS_RESIDENT_MEMORY_BYTES,
            "Resident memory size in bytes",
            stats.resident_memory_bytes,
        )?;
        gauge(
            &mut encoder,
            names::PROCESS_VIRTUAL_MEMORY_BYTES,
            "Virtual memory size in bytes",
            stats.virtual_memory_bytes,
        )?;
        if let Some(open) = stats.open_fds {
            gauge(
                &mut encoder,
                names::PROCESS_OPEN_FDS,
                "Number of open file descriptors",
                open,
            )?;
        }
        if let Some(max) = stats.max_fds {
            gauge(
                &mut encoder,
                names::PROCESS_MAX_FDS,
                "Maximum number of open file descriptors",
                max,
            )?;
        }
        if let Some(start) = stats.start_time_seconds {
            gauge(
                &mut encoder,
                names::PROCESS_START_TIME_SECONDS,
                "Start time of the process since unix epoch in seconds",
                start,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        // a command name with a space and a parenthesis
        let stat = "4242 (my op) erator) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 \
                    9 0 123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                utime: 250,
                stime: 75,
                starttime: 123456,
                vsize: 987654321
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(
            parse_status_rss("Name:\top\nVmSize:\t  9000 kB\nVmRSS:\t    2048 kB\n"),
            Some(2048.0 * 1024.0)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024.0));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000.0)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let stats = read().expect("/proc/self is readable on Linux");
        assert!(stats.resident_memory_bytes > 1024.0 * 1024.0, "{stats:?}");
        assert!(
            stats.virtual_memory_bytes >= stats.resident_memory_bytes,
            "{stats:?}"
        );
        assert!(stats.open_fds.is_some_and(|n| n >= 3.0), "{stats:?}");
        assert!(
            stats
                .max_fds
                .is_some_and(|n| n >= stats.open_fds.unwrap_or(0.0))
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = stats.start_time_seconds.expect("a start time");
        // started before now, within the last day (and /proc's tick rounding)
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
        assert!(stats.cpu_seconds >= 0.0);
    }
}
