//! `leader_election_master_status{name}`: whether this replica leads.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::names;

/// The `name` label: the Lease's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LeaseLabel {
    name: String,
}

/// The leader-election status gauge.
#[derive(Debug, Clone)]
pub(crate) struct LeaderFamily(Family<LeaseLabel, Gauge>);

impl LeaderFamily {
    /// The family, registered on `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let family = Family::default();
        registry.register(
            names::LEADER_ELECTION_MASTER_STATUS,
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease. \
             Please make sure to group by name",
            family.clone(),
        );
        Self(family)
    }

    /// Sets the gauge of Lease `lease` to 1 (leading) or 0.
    pub(crate) fn set(&self, lease: &str, leading: bool) {
        self.0
            .get_or_create(&LeaseLabel {
                name: lease.to_owned(),
            })
            .set(i64::from(leading));
    }
}
