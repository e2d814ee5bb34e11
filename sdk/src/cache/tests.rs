use super::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn one_informer_per_scope() {
    let cache = SharedCache::new(crate::cache::informer::list_watch_tests::test_client());
    let a = cache.informer::<ConfigMap>().unwrap();
    let b = cache.informer::<ConfigMap>().unwrap();
    assert!(Arc::ptr_eq(&a.inner_ptr(), &b.inner_ptr()));
    let _ns = cache
        .informer_for(Scope::<ConfigMap>::all().namespace("x"))
        .unwrap();
    let _ns2 = cache
        .informer_for(Scope::<ConfigMap>::all().namespace("x"))
        .unwrap();
    let _sel = cache
        .informer_for(Scope::<ConfigMap>::all().namespace("x").labels("a=b"))
        .unwrap();
    let _meta = cache.informer::<PartialObjectMeta<ConfigMap>>().unwrap();
    let _pods = cache.informer::<Pod>().unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let _dyn = cache
        .informer_for(Scope::<DynamicObject>::with_dyntype(ar))
        .unwrap();
    // a projection is an informer of its own (keyed by (K, P))
    struct Phase;
    impl Projection<Pod> for Phase {
        fn project(_: Pod) -> Self {
            Phase
        }
    }
    let projected = cache.informer::<Projected<Pod, Phase>>().unwrap();
    let _projected2 = cache.informer::<Projected<Pod, Phase>>().unwrap();
    assert_eq!(cache.informer_count(), 7);
    // its logs tell it from a whole-object informer of the kind
    assert!(
        projected
            .describe()
            .starts_with("v1/Pod (all namespaces, projected as ")
            && projected.describe().ends_with("Phase)"),
        "{}",
        projected.describe()
    );
    assert!(
        cache
            .get::<ConfigMap>(Some("x"), "y")
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        cache.list::<k8s_openapi::api::core::v1::Secret>(None).await,
        Err(CacheError::NoInformer(_))
    ));
}

#[tokio::test]
async fn kind_transforms_run_after_the_managed_fields_strip() {
    fn cm() -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                annotations: Some([("big".to_string(), "x".repeat(100))].into()),
                managed_fields: Some(vec![Default::default()]),
                ..Default::default()
            },
            ..Default::default()
        }
    }
    let drop_annotations = |c: &mut ConfigMap| c.metadata.annotations = None;
    let cache = SharedCache::builder(crate::cache::informer::list_watch_tests::test_client())
        .transform::<ConfigMap>(drop_annotations)
        .build();
    let mut obj = cm();
    cache.transform_of::<ConfigMap>().expect("a transform")(&mut obj);
    assert_eq!(obj.metadata.annotations, None);
    assert_eq!(obj.metadata.managed_fields, None);
    // other kinds: the strip only
    let mut pod = Pod::default();
    pod.metadata.managed_fields = Some(vec![Default::default()]);
    pod.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    cache.transform_of::<Pod>().expect("the strip")(&mut pod);
    assert_eq!(pod.metadata.managed_fields, None);
    assert!(pod.metadata.annotations.is_some());
    // managedFields kept: the kind's transform alone
    let cache = SharedCache::builder(crate::cache::informer::list_watch_tests::test_client())
        .keep_managed_fields()
        .transform::<ConfigMap>(drop_annotations)
        .build();
    let mut obj = cm();
    cache.transform_of::<ConfigMap>().expect("a transform")(&mut obj);
    assert_eq!(obj.metadata.annotations, None);
    assert!(obj.metadata.managed_fields.is_some());
    assert!(cache.transform_of::<Pod>().is_none());
}

#[tokio::test(start_paused = true)]
async fn wait_for_sync_names_the_kind() {
    let cache = SharedCache::new(crate::cache::informer::list_watch_tests::test_client());
    cache.informer::<ConfigMap>().unwrap();
    let err = cache
        .wait_for_sync(Duration::from_millis(10))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("v1/ConfigMap"), "{msg}");
    assert!(msg.contains("not started"), "{msg}");
    assert!(msg.contains("RBAC"), "{msg}");
}
