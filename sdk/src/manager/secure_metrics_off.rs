//! Built without the `secure-metrics` feature: the metrics server is plain
//! HTTP, and no [`Secured`] value can exist (the manager's code that serves
//! HTTPS metrics keeps its shape and is never reached).

/// The HTTPS metrics server, prepared: uninhabited without the feature.
#[derive(Debug)]
pub(crate) enum Secured {}
