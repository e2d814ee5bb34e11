//! What the shard module asks of the informer machinery outside the shared
//! cache: whether the server filters a kind by a KEP-5866 shard selector,
//! and a metadata-only informer of labelled objects (the label mode's
//! labeller).

use kube::core::PartialObjectMeta;
use kube::{Client, Resource};
use tokio_util::sync::CancellationToken;

use super::{
    list_watch::ListWatch,
    shared_index_informer::{InformerOptions, SharedIndexInformer},
};
use crate::cache::cacheable::Cacheable;
use crate::cache::error::ReflectorError;

/// Whether the server filters the objects of `K` in `namespace` (`None`:
/// all) by the KEP-5866 shard selector `selector`: one LIST of one object
/// (see [`ListWatch::server_shards`]).
pub(crate) async fn server_filters_by_shard_selector<K>(
    client: Client,
    namespace: Option<&str>,
    selector: &str,
) -> Result<bool, ReflectorError>
where
    K: Resource<DynamicType = ()> + 'static,
{
    let mut lw = ListWatch::<K>::probe(client, &());
    if let Some(namespace) = namespace {
        lw = lw.namespace(namespace);
    }
    lw.set_shard_selector(Some(selector.to_owned()));
    lw.server_shards().await
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
    K: Cacheable<DynamicType = ()>,
{
    let mut lw = ListWatch::<PartialObjectMeta<K>>::new(client, &()).labels(labels);
    if let Some(namespace) = namespace {
        lw = lw.namespace(namespace);
    }
    SharedIndexInformer::with_cancel(lw, InformerOptions::default(), cancel, None)
}
