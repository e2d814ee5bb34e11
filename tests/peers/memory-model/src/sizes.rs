//! `memory-model sizes`: the inline size (`size_of`) of the k8s-openapi
//! types the measured objects are made of, beside Go's (`go-informer
//! -sizes`, `unsafe.Sizeof`): Rust keeps an `Option<Struct>` inline (its
//! full size even when absent) where Go keeps a pointer (8 bytes when nil).

use std::mem::size_of;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerStatus, Lifecycle, Pod, PodSpec, PodStatus, Probe,
    ResourceRequirements, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The types, by the name Go's side prints them under.
pub fn rust_sizes() -> Vec<(&'static str, usize)> {
    vec![
        ("ConfigMap", size_of::<ConfigMap>()),
        ("ObjectMeta", size_of::<ObjectMeta>()),
        ("Pod", size_of::<Pod>()),
        ("PodSpec", size_of::<PodSpec>()),
        ("PodStatus", size_of::<PodStatus>()),
        ("Container", size_of::<Container>()),
        ("ContainerStatus", size_of::<ContainerStatus>()),
        ("Probe", size_of::<Probe>()),
        ("Lifecycle", size_of::<Lifecycle>()),
        ("SecurityContext", size_of::<SecurityContext>()),
        ("ResourceRequirements", size_of::<ResourceRequirements>()),
    ]
}
