use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
#[cfg(feature = "protobuf")]
use k8s_pb::{api::core::v1 as pb_core, apimachinery::pkg::apis::meta::v1 as pb_meta};
#[cfg(feature = "protobuf")]
use prost::Message;

use super::*;
use crate::cache::cacheable::drops_owner_references;
#[cfg(feature = "protobuf")]
use crate::cache::cacheable::protobuf_codec;
#[cfg(feature = "protobuf")]
use crate::cache::decode::json;

/// The `colour` key of a ConfigMap; counts its calls.
struct Colour(Option<String>);

static COLOUR_CALLS: AtomicUsize = AtomicUsize::new(0);

impl Projection<ConfigMap> for Colour {
    fn project(cm: ConfigMap) -> Self {
        COLOUR_CALLS.fetch_add(1, Ordering::SeqCst);
        Colour(cm.data.and_then(|mut d| d.remove("colour")))
    }
}

/// Keeps neither labels nor ownerReferences.
struct Bare;

impl Projection<ConfigMap> for Bare {
    const LABELS: bool = false;
    const OWNER_REFERENCES: bool = false;
    fn project(_: ConfigMap) -> Self {
        Bare
    }
}

fn cm() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("a".into()),
            namespace: Some("ns".into()),
            uid: Some("u1".into()),
            resource_version: Some("7".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            annotations: Some([("big".to_string(), "x".repeat(100))].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "parent".into(),
                uid: "p1".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            finalizers: Some(vec!["f".into()]),
            ..Default::default()
        },
        data: Some([("colour".to_string(), "red".to_string())].into()),
        ..Default::default()
    }
}

#[test]
fn the_metadata_essentials_are_kept_beside_the_projection() {
    let p = Projected::<ConfigMap, Colour>::project(cm());
    assert_eq!(p.0.as_deref(), Some("red"));
    let m = p.metadata();
    assert_eq!(m.name.as_deref(), Some("a"));
    assert_eq!(m.namespace.as_deref(), Some("ns"));
    assert_eq!(m.uid.as_deref(), Some("u1"));
    assert_eq!(m.resource_version.as_deref(), Some("7"));
    assert_eq!(m.labels.as_ref().map(|l| l.len()), Some(1));
    assert_eq!(m.owner_references.as_ref().map(|o| o.len()), Some(1));
    assert_eq!(m.annotations, None);
    assert_eq!(m.finalizers, None);
    assert_eq!(
        <Projected<ConfigMap, Colour> as Resource>::kind(&()),
        "ConfigMap"
    );
    assert_eq!(
        <Projected<ConfigMap, Colour> as Resource>::plural(&()),
        "configmaps"
    );

    let bare = Projected::<ConfigMap, Bare>::project(cm());
    assert_eq!(bare.metadata().labels, None);
    assert_eq!(bare.metadata().owner_references, None);
    assert_eq!(bare.metadata().name.as_deref(), Some("a"));
    // what it keeps is a property of its type: no registration, no
    // kind asked first
    assert!(drops_owner_references::<Projected<ConfigMap, Bare>>().is_some());
    assert!(drops_owner_references::<Projected<ConfigMap, Colour>>().is_none());
    assert!(drops_owner_references::<ConfigMap>().is_none());
}

#[cfg(feature = "protobuf")]
#[test]
fn json_and_protobuf_decoding_project_each_object_once() {
    let before = COLOUR_CALLS.load(Ordering::SeqCst);
    let body = serde_json::json!({
        "kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "9"},
        "items": [
            {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "8"}, "data": {"colour": "red"}},
            {"metadata": {"name": "b", "namespace": "ns", "resourceVersion": "9"}, "data": {"colour": "blue"}},
        ]
    });
    let page =
        json::decode_list::<Projected<ConfigMap, Colour>>(&serde_json::to_vec(&body).unwrap())
            .unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.items[1].0.as_deref(), Some("blue"));
    assert_eq!(COLOUR_CALLS.load(Ordering::SeqCst) - before, 2);

    // protobuf: the projection's codec is the kind's, then the projection
    let cm_codec =
        protobuf_codec::<Projected<ConfigMap, Colour>>().expect("a projected ConfigMap codec");
    let raw = pb_core::ConfigMap {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("c".into()),
            namespace: Some("ns".into()),
            resource_version: Some("10".into()),
            ..Default::default()
        }),
        data: [("colour".to_string(), "green".to_string())].into(),
        ..Default::default()
    }
    .encode_to_vec();
    let p = cm_codec.object(&raw).unwrap();
    assert_eq!(p.0.as_deref(), Some("green"));
    assert_eq!(p.metadata().resource_version.as_deref(), Some("10"));
    assert_eq!(COLOUR_CALLS.load(Ordering::SeqCst) - before, 3);
    // every built-in kind's projection has its kind's codec
    struct Phase;
    impl Projection<k8s_openapi::api::core::v1::Pod> for Phase {
        fn project(_: k8s_openapi::api::core::v1::Pod) -> Self {
            Phase
        }
    }
    assert!(protobuf_codec::<Projected<k8s_openapi::api::core::v1::Pod, Phase>>().is_some());
    // a type without a protobuf codec has none projected
    struct Name;
    impl Projection<kube::core::PartialObjectMeta<ConfigMap>> for Name {
        fn project(_: kube::core::PartialObjectMeta<ConfigMap>) -> Self {
            Name
        }
    }
    assert!(
        protobuf_codec::<Projected<kube::core::PartialObjectMeta<ConfigMap>, Name>>().is_none()
    );
}
