//! How a sharded replica's cache is divided: the shard module decides the
//! mode of each sharded kind (it asks the API server once whether it
//! filters by a KEP-5866 shard selector, and whether this replica may
//! label the kind) and hands the cache the filter each share lists by.
//! The cache's reflector lists and watches what it is given, nothing more.

use std::{any::TypeId, time::Duration};

use kube::{Client, Resource};
use tokio::sync::watch;

use super::division::{ShardMode, ShardSelector};
use super::handle::ShardHandle;
use crate::cache::{ListFilter, SharedCache, is_namespaced, server_filters_by_shard_selector};

/// How long the first retry of a failed probe waits; doubled up to
/// [`PROBE_RETRY_MAX`].
const PROBE_RETRY: Duration = Duration::from_millis(800);
const PROBE_RETRY_MAX: Duration = Duration::from_secs(30);

impl ShardHandle {
    /// Divides `cache`'s informer of `K` by this replica's share
    /// `selector` holds: once the replica is first active, the server is
    /// asked (once, logged) how it lets the kind be divided, and from then
    /// on the cache lists by the share in that mode. Nothing happens when
    /// the kind is already cached undivided (logged by the cache).
    pub(crate) fn divide_kind<K>(
        &self,
        cache: &SharedCache,
        selector: watch::Receiver<Option<ShardSelector>>,
    ) where
        K: Resource<DynamicType = ()> + 'static,
        K::Scope: 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                kind = %K::kind(&()),
                "sharded cache outside a Tokio runtime: the kind's cache is not divided"
            );
            return;
        };
        let (filter, filter_rx) = watch::channel(None);
        if !cache.filter_kind::<K>(filter_rx) {
            return;
        }
        let (mode, mode_rx) = watch::channel(None);
        self.divided.lock().insert(TypeId::of::<K>(), mode_rx);
        let kind = Kind::of::<K>(cache);
        let shutdown = self.shutdown.clone();
        runtime.spawn(async move {
            tokio::select! {
                () = divide::<K>(kind, selector, filter, mode) => {}
                () = shutdown.cancelled() => {}
            }
        });
    }

    /// The mode the cache of `K` was divided in (`None` inside until the
    /// server was asked), if [`divide_kind`](Self::divide_kind) divides it.
    pub(crate) fn divided_mode<K: 'static>(&self) -> Option<watch::Receiver<Option<ShardMode>>> {
        self.divided.lock().get(&TypeId::of::<K>()).cloned()
    }
}

/// What the probe of one kind needs.
struct Kind {
    /// `apps/v1/Deployment`, for logs.
    name: String,
    group: String,
    resource: String,
    namespace: Option<String>,
    client: Client,
}

impl Kind {
    /// The kind `K` as `cache`'s informer of it lists it.
    fn of<K>(cache: &SharedCache) -> Self
    where
        K: Resource<DynamicType = ()> + 'static,
        K::Scope: 'static,
    {
        Self {
            name: format!("{}/{}", K::api_version(&()), K::kind(&())),
            group: K::group(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
            namespace: cache
                .namespace()
                .filter(|_| is_namespaced::<K>())
                .map(str::to_owned),
            client: cache.raw_client().clone(),
        }
    }
}

/// Until the share's sender or the cache's filter is gone: waits for the
/// first share, decides the mode, then keeps the cache's filter on the
/// share in that mode.
async fn divide<K>(
    kind: Kind,
    mut selector: watch::Receiver<Option<ShardSelector>>,
    filter: watch::Sender<Option<ListFilter>>,
    mode: watch::Sender<Option<ShardMode>>,
) where
    K: Resource<DynamicType = ()> + 'static,
{
    if selector.borrow().is_none() {
        tracing::debug!(kind = %kind.name, "waiting until this replica is active in its shard ring before listing its share");
    }
    let first = match selector.wait_for(Option::is_some).await {
        Ok(first) => first.clone(),
        Err(_) => return,
    };
    let Some(first) = first else { return };
    let Some(decided) = decide::<K>(&kind, &first, &filter).await else {
        return;
    };
    mode.send_replace(Some(decided));
    loop {
        let share = selector.borrow_and_update().clone();
        if let Some(share) = share {
            let next = decided.filter(&share);
            filter.send_if_modified(|current| {
                let changed = current.as_ref() != Some(&next);
                if changed {
                    *current = Some(next);
                }
                changed
            });
        }
        tokio::select! {
            changed = selector.changed() => if changed.is_err() { return },
            () = filter.closed() => return,
        }
    }
}

/// Asks the server whether it filters `kind` by `share`'s shard selector
/// (retried with backoff until it answers) and, if not and the kind is
/// labelled, whether this replica may patch it; logs the mode once.
/// `None` when the cache's filter is gone first.
async fn decide<K>(
    kind: &Kind,
    share: &ShardSelector,
    filter: &watch::Sender<Option<ListFilter>>,
) -> Option<ShardMode>
where
    K: Resource<DynamicType = ()> + 'static,
{
    let mut delay = PROBE_RETRY;
    let filters = loop {
        let probe = server_filters_by_shard_selector::<K>(
            kind.client.clone(),
            kind.namespace.as_deref(),
            &share.server,
        );
        match probe.await {
            Ok(filters) => break filters,
            Err(error) => {
                tracing::warn!(
                    kind = %kind.name,
                    %error,
                    retry_in = ?delay,
                    "could not ask the API server whether it filters this kind by shard \
                     selector; asking again"
                );
                // Meanwhile the cache lists by the shard selector: a server
                // that cannot answer the probe fails that list too, where
                // the cache's start check reports it (a kind not served, an
                // unreachable server); one that ignores the selector gives
                // every object until the mode is known (keys stay gated).
                filter.send_if_modified(|current| {
                    let unset = current.is_none();
                    if unset {
                        *current = Some(ShardMode::ServerSide.filter(share));
                    }
                    unset
                });
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = filter.closed() => return None,
                }
                delay = (delay * 2).min(PROBE_RETRY_MAX);
            }
        }
    };
    // label mode needs `patch` on the kind; unknown: try it
    let denied = !filters
        && share.labels.is_some()
        && may_patch(
            kind.client.clone(),
            &kind.group,
            &kind.resource,
            kind.namespace.as_deref(),
        )
        .await
            == Some(false);
    let mode = ShardMode::of(filters, share.labels.is_some() && !denied);
    log_mode(&kind.name, mode, share, denied);
    Some(mode)
}

/// The one line that says how this kind's cache is divided.
fn log_mode(kind: &str, mode: ShardMode, share: &ShardSelector, denied: bool) {
    match mode {
        ShardMode::ServerSide => tracing::info!(
            kind,
            mode = mode.as_str(),
            "sharded cache: the API server lists and watches only this replica's share \
             (KEP-5866 shardSelector on object.metadata.namespace)"
        ),
        ShardMode::Labels => tracing::info!(
            kind,
            mode = mode.as_str(),
            selector = share.labels.as_deref().unwrap_or_default(),
            "sharded cache: the API server ignores shardSelector (feature gate \
             ShardedListAndWatch off, or Kubernetes before 1.36); this replica lists and \
             watches the objects labelled with its shard (label mode)"
        ),
        ShardMode::Undivided if denied => tracing::warn!(
            kind,
            mode = mode.as_str(),
            "sharded cache: the API server ignores shardSelector (feature gate \
             ShardedListAndWatch off, or Kubernetes before 1.36) and this replica may not \
             patch this kind to label it with its shard (label mode needs `patch`, see \
             Rules::sharding); this replica caches every object and reconciles only its share"
        ),
        ShardMode::Undivided => tracing::warn!(
            kind,
            mode = mode.as_str(),
            "sharded cache: the API server ignores shardSelector (feature gate \
             ShardedListAndWatch off, or Kubernetes before 1.36) and this kind is not \
             labelled; this replica caches every object and reconciles only its share"
        ),
    }
}

/// Whether this client may `patch` `resource` of API `group` in
/// `namespace` (`None`: in every namespace), as a SelfSubjectAccessReview
/// answers (any authenticated user may ask); `None` when the server could
/// not say.
async fn may_patch(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the permission check asks about: the kind's group and
    /// resource, in the cache's namespace for a namespaced kind only.
    #[tokio::test]
    async fn a_kind_is_probed_in_the_scope_its_informer_lists() {
        use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap, core::v1::Namespace};
        let client = crate::cache::test_client();
        let scoped = SharedCache::builder(client.clone())
            .namespace("prod")
            .build();
        let config_maps = Kind::of::<ConfigMap>(&scoped);
        assert_eq!(
            (config_maps.group.as_str(), config_maps.resource.as_str()),
            ("", "configmaps")
        );
        assert_eq!(config_maps.namespace.as_deref(), Some("prod"));
        assert_eq!(config_maps.name, "v1/ConfigMap");
        let namespaces = Kind::of::<Namespace>(&scoped);
        assert_eq!(namespaces.namespace, None);
        let deployments = Kind::of::<Deployment>(&SharedCache::new(client));
        assert_eq!(
            (deployments.group.as_str(), deployments.resource.as_str()),
            ("apps", "deployments")
        );
        assert_eq!(deployments.namespace, None);
    }
}
