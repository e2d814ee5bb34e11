//! The cache's side of sharding ([`crate::shard`]): what a sharded
//! informer lists by ([`ShardSelector`]), the mode its reflector found
//! ([`ShardShare`]), the permission check label mode needs, and the stray
//! watch the label mode's labeller runs outside the shared cache.

use kube::core::PartialObjectMeta;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::informer::{InformerOptions, SharedIndexInformer};
use super::list_watch::ListWatch;

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

/// A replica's share of one kind as its informer follows it, and where
/// the informer's reflector publishes how the server lets it be divided
/// (the label mode's labeller acts on that answer, never asks again).
#[derive(Debug, Clone)]
pub(crate) struct ShardShare {
    /// The replica's share (`None` until it is first active).
    pub(crate) selector: watch::Receiver<Option<ShardSelector>>,
    /// The mode, once the reflector has probed the server.
    pub(crate) mode: watch::Sender<Option<ShardMode>>,
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

    /// The selector this mode lists by, out of `selector`: what a change
    /// of the replica's share is judged by (`None`: everything).
    pub(crate) fn applied(self, selector: &ShardSelector) -> Option<&str> {
        match self {
            Self::ServerSide => Some(&selector.server),
            Self::Labels => selector.labels.as_deref(),
            Self::Undivided => None,
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

/// Whether this client may `patch` `resource` of API `group` in
/// `namespace` (`None`: in every namespace), as a SelfSubjectAccessReview
/// answers (any authenticated user may ask); `None` when the server could
/// not say.
pub(crate) async fn may_patch(
    client: Client,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Option<bool> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                namespace: namespace.map(str::to_owned),
                verb: Some("patch".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    match kube::Api::<SelfSubjectAccessReview>::all(client)
        .create(&kube::api::PostParams::default(), &review)
        .await
    {
        Ok(answer) => answer.status.map(|s| s.allowed),
        Err(error) => {
            tracing::debug!(%error, "could not ask whether this replica may patch its sharded kind");
            None
        }
    }
}

/// A metadata-only informer of the `K` objects `labels` selects, in
/// `namespace` (`None`: all), outside any shared cache, stopped when
/// `cancel` fires. Not started.
pub(crate) fn metadata_informer<K>(
    client: Client,
    namespace: Option<&str>,
    labels: &str,
    cancel: CancellationToken,
) -> SharedIndexInformer<PartialObjectMeta<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    let mut lw = ListWatch::<PartialObjectMeta<K>>::new(client, &()).labels(labels);
    if let Some(namespace) = namespace {
        lw = lw.namespace(namespace);
    }
    SharedIndexInformer::with_cancel(lw, InformerOptions::default(), cancel, None)
}

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
            ShardMode::ServerSide.applied(&selector),
            Some("shardRange(...)")
        );
        assert_eq!(
            ShardMode::Labels.applied(&selector),
            Some("shard.opkit.dev/r=00")
        );
        assert_eq!(ShardMode::Undivided.applied(&selector), None);
    }
}
