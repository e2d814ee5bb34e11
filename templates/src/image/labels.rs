//! The image's OCI labels: where its source is, which revision, which
//! version — from the package and from git when the project is a checkout.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// `org.opencontainers.image.source`.
pub const SOURCE: &str = "org.opencontainers.image.source";
/// `org.opencontainers.image.revision`.
pub const REVISION: &str = "org.opencontainers.image.revision";
/// `org.opencontainers.image.version`.
pub const VERSION: &str = "org.opencontainers.image.version";
/// `org.opencontainers.image.title`.
pub const TITLE: &str = "org.opencontainers.image.title";

/// Labels for a binary `title` of version `version` built from `dir`: the
/// source is the package's `repository`, else git's `origin` remote; the
/// revision is git's `HEAD` commit. Labels that cannot be known are left
/// out rather than guessed.
pub(crate) fn labels(
    dir: &Path,
    title: &str,
    version: &str,
    repository: Option<&str>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert(TITLE.to_owned(), title.to_owned());
    labels.insert(VERSION.to_owned(), version.to_owned());
    let source = repository
        .map(str::to_owned)
        .or_else(|| git(dir, &["remote", "get-url", "origin"]));
    if let Some(source) = source {
        labels.insert(SOURCE.to_owned(), source);
    }
    if let Some(revision) = git(dir, &["rev-parse", "--verify", "HEAD"]) {
        labels.insert(REVISION.to_owned(), revision);
    }
    labels
}

/// One line of git's output, if git runs and succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!line.is_empty()).then_some(line)
}

/// The `created` time and the layer's mtime: `SOURCE_DATE_EPOCH` when set
/// (the reproducible-builds convention), else 0 and no `created`.
pub(crate) fn source_date_epoch() -> Result<Option<u64>, String> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("SOURCE_DATE_EPOCH={value:?} is not a number of seconds")),
        _ => Ok(None),
    }
}

/// RFC 3339 (UTC) for seconds since the epoch.
pub(crate) fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil-from-days (Howard Hinnant's algorithm), for days >= 0.
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn labels_without_git() {
        let dir = tempfile::tempdir().unwrap();
        let labels = labels(dir.path(), "app", "1.0.0", Some("https://example.com/app"));
        assert_eq!(labels[VERSION], "1.0.0");
        assert_eq!(labels[SOURCE], "https://example.com/app");
        assert!(!labels.contains_key(REVISION) || labels[REVISION].len() == 40);
    }
}
