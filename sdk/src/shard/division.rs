//! The shapes of a divided cache: a replica's share of a kind
//! ([`ShardSelector`]), the mode the server lets a kind be divided in
//! ([`ShardMode`]), and what the cache lists by in each.

use std::{any::TypeId, collections::HashMap, sync::Arc};

use tokio::sync::watch;

use crate::cache::ListFilter;

/// A replica's share of one kind, in both forms a server may filter by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    /// The KEP-5866 shard selector of the replica's ring arcs (it changes
    /// with the member set).
    pub(crate) server: String,
    /// The label selector of the objects labelled with the replica's id
    /// (constant), for a kind the ring's labeller labels; `None`: the kind
    /// is not labelled, and a server that does not filter gets every object.
    pub(crate) labels: Option<String>,
}

/// How a sharded informer divides its kind, once the server was probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardMode {
    /// The server filters by the KEP-5866 shard selector.
    ServerSide,
    /// The server ignores it; the informer lists by the shard label.
    Labels,
    /// The server ignores it and the kind is not labelled: every object.
    Undivided,
}

impl ShardMode {
    /// The mode of a kind, labelled or not, on a server that filters
    /// (`server_filters`) or not.
    pub(crate) fn of(server_filters: bool, labelled: bool) -> Self {
        match (server_filters, labelled) {
            (true, _) => Self::ServerSide,
            (false, true) => Self::Labels,
            (false, false) => Self::Undivided,
        }
    }

    /// What the cache lists by in this mode for the share `selector`.
    pub(crate) fn filter(self, selector: &ShardSelector) -> ListFilter {
        match self {
            Self::ServerSide => ListFilter {
                labels: None,
                shard_selector: Some(selector.server.clone()),
            },
            Self::Labels => ListFilter {
                labels: selector.labels.clone(),
                shard_selector: None,
            },
            Self::Undivided => ListFilter::default(),
        }
    }

    /// For logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ServerSide => "server-side shard selector",
            Self::Labels => "label selector",
            Self::Undivided => "filter-at-queue",
        }
    }
}

/// The mode each divided kind of a replica was found in, by Rust type
/// (`None` inside until the server was asked): what the labeller follows.
pub(crate) type DividedKinds =
    Arc<parking_lot::Mutex<HashMap<TypeId, watch::Receiver<Option<ShardMode>>>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_lists_by_its_own_selector() {
        let selector = ShardSelector {
            server: "shardRange(...)".into(),
            labels: Some("shard.opkit.dev/r=00".into()),
        };
        assert_eq!(ShardMode::of(true, true), ShardMode::ServerSide);
        assert_eq!(ShardMode::of(false, true), ShardMode::Labels);
        assert_eq!(ShardMode::of(false, false), ShardMode::Undivided);
        assert_eq!(
            ShardMode::ServerSide.filter(&selector),
            ListFilter {
                labels: None,
                shard_selector: Some("shardRange(...)".into())
            }
        );
        assert_eq!(
            ShardMode::Labels.filter(&selector),
            ListFilter {
                labels: Some("shard.opkit.dev/r=00".into()),
                shard_selector: None
            }
        );
        assert_eq!(
            ShardMode::Undivided.filter(&selector),
            ListFilter::default()
        );
    }
}
