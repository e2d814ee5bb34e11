//! [`ShareFamilies`]: the per-controller `opkit_shard_*` series a sharded
//! controller records into (registered by `observe.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The `controller` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ControllerLabel {
    controller: String,
}

/// Per sharded controller: the objects this replica owned at the last
/// rebalance, how many it gained at rebalances, and how many reconciles it
/// cancelled because their permit lapsed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareFamilies {
    pub(super) owned: Family<ControllerLabel, Gauge>,
    pub(super) gained: Family<ControllerLabel, Counter>,
    pub(super) cancelled: Family<ControllerLabel, Counter>,
}

impl ShareFamilies {
    /// Records a rebalance of `controller`: `owned` objects now, `gained`
    /// of them new to this replica.
    pub(crate) fn record(&self, controller: &str, owned: usize, gained: usize) {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        self.owned
            .get_or_create(&label)
            .set(i64::try_from(owned).unwrap_or(i64::MAX));
        self.gained.get_or_create(&label).inc_by(gained as u64);
    }

    /// Counts a reconcile of `controller` cancelled by a lapsed permit.
    pub(crate) fn cancelled(&self, controller: &str) {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        self.cancelled.get_or_create(&label).inc();
    }
}
