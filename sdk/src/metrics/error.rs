//! Typed errors of `opkit::metrics`.

/// Why the metrics could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// A registered metric or collector failed to write itself out (a
    /// collector returned an error, or a label could not be encoded).
    #[error(
        "cannot encode the metrics in the Prometheus text format: a metric or collector failed"
    )]
    Encode,
}
