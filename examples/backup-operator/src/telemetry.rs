//! Where the operator's tracing goes: log lines to stderr, filtered by
//! `RUST_LOG` or `--log-level`. (A generated project can also export spans
//! over OTLP with its `otel` feature; this example leaves that out, to keep
//! the workspace's dependencies small.)

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: text or JSON lines (`json`), at
/// `level` unless `RUST_LOG` is set.
pub fn init(json: bool, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        subscriber.json().init();
    } else {
        subscriber.init();
    }
}
