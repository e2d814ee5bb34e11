//! The cache's own series: `opkit_cache_undecodable_objects{kind}`.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::names::CACHE_UNDECODABLE_OBJECTS;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// One family for the process: informers are not tied to a registry, so
/// every [`Metrics`](super::Metrics) exports the same gauge.
static UNDECODABLE: LazyLock<Family<KindLabel, Gauge>> = LazyLock::new(Family::default);

/// Registers the gauge in `registry`.
pub(crate) fn register(registry: &mut Registry) {
    registry.register(
        CACHE_UNDECODABLE_OBJECTS,
        "Objects in the cache whose current version does not deserialize into the Rust type",
        UNDECODABLE.clone(),
    );
}

/// Adds `delta` (negative: removes) to the gauge of `kind` (`apiVersion/kind`).
pub(crate) fn add_undecodable(kind: &str, delta: i64) {
    if delta != 0 {
        UNDECODABLE
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc_by(delta);
    }
}
