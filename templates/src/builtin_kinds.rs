//! Kubernetes' built-in kinds (v1.36, the version k8s-openapi is built
//! for) and their k8s-openapi types: what `create api --resource=false`
//! accepts without `--external-api-path`. Regenerate the table from
//! k8s-openapi's `impl Resource` blocks (`GROUP`, `VERSION`, `KIND` of
//! every type under `src/v1_36`, and the type's module) when the
//! Kubernetes version changes.

/// One built-in kind: API group (`core` for the legacy group), version,
/// kind, and the Rust path of its k8s-openapi type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BuiltinKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub path: &'static str,
}

/// Every built-in kind, sorted by group, version and kind.
const BUILTIN_KINDS: &[BuiltinKind] = &[
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingAdmissionPolicy",
        path: "k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingAdmissionPolicyBinding",
        path: "k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        path: "k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicy",
        path: "k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicyBinding",
        path: "k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        path: "k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1alpha1",
        kind: "MutatingAdmissionPolicy",
        path: "k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1alpha1",
        kind: "MutatingAdmissionPolicyBinding",
        path: "k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1beta1",
        kind: "MutatingAdmissionPolicy",
        path: "k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicy",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1beta1",
        kind: "MutatingAdmissionPolicyBinding",
        path: "k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding",
    },
    BuiltinKind {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        path: "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition",
    },
    BuiltinKind {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        path: "k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        path: "k8s_openapi::api::apps::v1::ControllerRevision",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        path: "k8s_openapi::api::apps::v1::DaemonSet",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        path: "k8s_openapi::api::apps::v1::Deployment",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        path: "k8s_openapi::api::apps::v1::ReplicaSet",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        path: "k8s_openapi::api::apps::v1::StatefulSet",
    },
    BuiltinKind {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "SelfSubjectReview",
        path: "k8s_openapi::api::authentication::v1::SelfSubjectReview",
    },
    BuiltinKind {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenRequest",
        path: "k8s_openapi::api::authentication::v1::TokenRequest",
    },
    BuiltinKind {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenReview",
        path: "k8s_openapi::api::authentication::v1::TokenReview",
    },
    BuiltinKind {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        path: "k8s_openapi::api::authorization::v1::LocalSubjectAccessReview",
    },
    BuiltinKind {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        path: "k8s_openapi::api::authorization::v1::SelfSubjectAccessReview",
    },
    BuiltinKind {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        path: "k8s_openapi::api::authorization::v1::SelfSubjectRulesReview",
    },
    BuiltinKind {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        path: "k8s_openapi::api::authorization::v1::SubjectAccessReview",
    },
    BuiltinKind {
        group: "autoscaling",
        version: "v1",
        kind: "HorizontalPodAutoscaler",
        path: "k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler",
    },
    BuiltinKind {
        group: "autoscaling",
        version: "v1",
        kind: "Scale",
        path: "k8s_openapi::api::autoscaling::v1::Scale",
    },
    BuiltinKind {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        path: "k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler",
    },
    BuiltinKind {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        path: "k8s_openapi::api::batch::v1::CronJob",
    },
    BuiltinKind {
        group: "batch",
        version: "v1",
        kind: "Job",
        path: "k8s_openapi::api::batch::v1::Job",
    },
    BuiltinKind {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        path: "k8s_openapi::api::certificates::v1::CertificateSigningRequest",
    },
    BuiltinKind {
        group: "certificates.k8s.io",
        version: "v1alpha1",
        kind: "ClusterTrustBundle",
        path: "k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle",
    },
    BuiltinKind {
        group: "certificates.k8s.io",
        version: "v1beta1",
        kind: "ClusterTrustBundle",
        path: "k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle",
    },
    BuiltinKind {
        group: "certificates.k8s.io",
        version: "v1beta1",
        kind: "PodCertificateRequest",
        path: "k8s_openapi::api::certificates::v1beta1::PodCertificateRequest",
    },
    BuiltinKind {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        path: "k8s_openapi::api::coordination::v1::Lease",
    },
    BuiltinKind {
        group: "coordination.k8s.io",
        version: "v1alpha2",
        kind: "LeaseCandidate",
        path: "k8s_openapi::api::coordination::v1alpha2::LeaseCandidate",
    },
    BuiltinKind {
        group: "coordination.k8s.io",
        version: "v1beta1",
        kind: "LeaseCandidate",
        path: "k8s_openapi::api::coordination::v1beta1::LeaseCandidate",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "APIGroup",
        path: "k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "APIGroupList",
        path: "k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "APIResourceList",
        path: "k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "APIVersions",
        path: "k8s_openapi::apimachinery::pkg::apis::meta::v1::APIVersions",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Binding",
        path: "k8s_openapi::api::core::v1::Binding",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "ComponentStatus",
        path: "k8s_openapi::api::core::v1::ComponentStatus",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "ConfigMap",
        path: "k8s_openapi::api::core::v1::ConfigMap",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Endpoints",
        path: "k8s_openapi::api::core::v1::Endpoints",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Event",
        path: "k8s_openapi::api::core::v1::Event",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "LimitRange",
        path: "k8s_openapi::api::core::v1::LimitRange",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Namespace",
        path: "k8s_openapi::api::core::v1::Namespace",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Node",
        path: "k8s_openapi::api::core::v1::Node",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "PersistentVolume",
        path: "k8s_openapi::api::core::v1::PersistentVolume",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "PersistentVolumeClaim",
        path: "k8s_openapi::api::core::v1::PersistentVolumeClaim",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Pod",
        path: "k8s_openapi::api::core::v1::Pod",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "PodTemplate",
        path: "k8s_openapi::api::core::v1::PodTemplate",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "ReplicationController",
        path: "k8s_openapi::api::core::v1::ReplicationController",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "ResourceQuota",
        path: "k8s_openapi::api::core::v1::ResourceQuota",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Secret",
        path: "k8s_openapi::api::core::v1::Secret",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Service",
        path: "k8s_openapi::api::core::v1::Service",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "ServiceAccount",
        path: "k8s_openapi::api::core::v1::ServiceAccount",
    },
    BuiltinKind {
        group: "core",
        version: "v1",
        kind: "Status",
        path: "k8s_openapi::apimachinery::pkg::apis::meta::v1::Status",
    },
    BuiltinKind {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        path: "k8s_openapi::api::discovery::v1::EndpointSlice",
    },
    BuiltinKind {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        path: "k8s_openapi::api::events::v1::Event",
    },
    BuiltinKind {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "FlowSchema",
        path: "k8s_openapi::api::flowcontrol::v1::FlowSchema",
    },
    BuiltinKind {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "PriorityLevelConfiguration",
        path: "k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration",
    },
    BuiltinKind {
        group: "internal.apiserver.k8s.io",
        version: "v1alpha1",
        kind: "StorageVersion",
        path: "k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IPAddress",
        path: "k8s_openapi::api::networking::v1::IPAddress",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        path: "k8s_openapi::api::networking::v1::Ingress",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        path: "k8s_openapi::api::networking::v1::IngressClass",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        path: "k8s_openapi::api::networking::v1::NetworkPolicy",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "ServiceCIDR",
        path: "k8s_openapi::api::networking::v1::ServiceCIDR",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1beta1",
        kind: "IPAddress",
        path: "k8s_openapi::api::networking::v1beta1::IPAddress",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1beta1",
        kind: "ServiceCIDR",
        path: "k8s_openapi::api::networking::v1beta1::ServiceCIDR",
    },
    BuiltinKind {
        group: "node.k8s.io",
        version: "v1",
        kind: "RuntimeClass",
        path: "k8s_openapi::api::node::v1::RuntimeClass",
    },
    BuiltinKind {
        group: "policy",
        version: "v1",
        kind: "Eviction",
        path: "k8s_openapi::api::policy::v1::Eviction",
    },
    BuiltinKind {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        path: "k8s_openapi::api::policy::v1::PodDisruptionBudget",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        path: "k8s_openapi::api::rbac::v1::ClusterRole",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        path: "k8s_openapi::api::rbac::v1::ClusterRoleBinding",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        path: "k8s_openapi::api::rbac::v1::Role",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        path: "k8s_openapi::api::rbac::v1::RoleBinding",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "DeviceClass",
        path: "k8s_openapi::api::resource::v1::DeviceClass",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaim",
        path: "k8s_openapi::api::resource::v1::ResourceClaim",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaimTemplate",
        path: "k8s_openapi::api::resource::v1::ResourceClaimTemplate",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceSlice",
        path: "k8s_openapi::api::resource::v1::ResourceSlice",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1alpha3",
        kind: "DeviceTaintRule",
        path: "k8s_openapi::api::resource::v1alpha3::DeviceTaintRule",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1alpha3",
        kind: "ResourcePoolStatusRequest",
        path: "k8s_openapi::api::resource::v1alpha3::ResourcePoolStatusRequest",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta1",
        kind: "DeviceClass",
        path: "k8s_openapi::api::resource::v1beta1::DeviceClass",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta1",
        kind: "ResourceClaim",
        path: "k8s_openapi::api::resource::v1beta1::ResourceClaim",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta1",
        kind: "ResourceClaimTemplate",
        path: "k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta1",
        kind: "ResourceSlice",
        path: "k8s_openapi::api::resource::v1beta1::ResourceSlice",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta2",
        kind: "DeviceClass",
        path: "k8s_openapi::api::resource::v1beta2::DeviceClass",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta2",
        kind: "DeviceTaintRule",
        path: "k8s_openapi::api::resource::v1beta2::DeviceTaintRule",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta2",
        kind: "ResourceClaim",
        path: "k8s_openapi::api::resource::v1beta2::ResourceClaim",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta2",
        kind: "ResourceClaimTemplate",
        path: "k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1beta2",
        kind: "ResourceSlice",
        path: "k8s_openapi::api::resource::v1beta2::ResourceSlice",
    },
    BuiltinKind {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        path: "k8s_openapi::api::scheduling::v1::PriorityClass",
    },
    BuiltinKind {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        kind: "PodGroup",
        path: "k8s_openapi::api::scheduling::v1alpha2::PodGroup",
    },
    BuiltinKind {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        kind: "Workload",
        path: "k8s_openapi::api::scheduling::v1alpha2::Workload",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        path: "k8s_openapi::api::storage::v1::CSIDriver",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        path: "k8s_openapi::api::storage::v1::CSINode",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIStorageCapacity",
        path: "k8s_openapi::api::storage::v1::CSIStorageCapacity",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        path: "k8s_openapi::api::storage::v1::StorageClass",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttachment",
        path: "k8s_openapi::api::storage::v1::VolumeAttachment",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttributesClass",
        path: "k8s_openapi::api::storage::v1::VolumeAttributesClass",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1beta1",
        kind: "VolumeAttributesClass",
        path: "k8s_openapi::api::storage::v1beta1::VolumeAttributesClass",
    },
    BuiltinKind {
        group: "storagemigration.k8s.io",
        version: "v1beta1",
        kind: "StorageVersionMigration",
        path: "k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration",
    },
];

/// Whether `group` is one of Kubernetes' own API groups.
pub(crate) fn is_builtin_group(group: &str) -> bool {
    BUILTIN_KINDS.iter().any(|b| b.group == group)
}

/// The built-in `kind` of `group`/`version`, or why there is none, with
/// the nearest names when `kind` looks like a typo or lives elsewhere.
pub(crate) fn builtin_kind(group: &str, version: &str, kind: &str) -> Result<BuiltinKind, String> {
    if let Some(found) = BUILTIN_KINDS
        .iter()
        .find(|b| b.group == group && b.version == version && b.kind == kind)
    {
        return Ok(*found);
    }
    let shown = |b: &BuiltinKind| {
        format!(
            "--group {} --version {} --kind {}",
            b.group, b.version, b.kind
        )
    };
    let elsewhere: Vec<String> = BUILTIN_KINDS
        .iter()
        .filter(|b| b.kind == kind)
        .map(shown)
        .collect();
    if !elsewhere.is_empty() {
        return Err(format!(
            "{group}/{version} has no built-in kind {kind}; it is served as {}",
            elsewhere.join(", or ")
        ));
    }
    let in_group: Vec<&BuiltinKind> = BUILTIN_KINDS
        .iter()
        .filter(|b| b.group == group && b.version == version)
        .collect();
    let typo = closest(kind, BUILTIN_KINDS.iter().map(|b| b.kind))
        .map(|near| format!("; did you mean {near}?"))
        .unwrap_or_default();
    if in_group.is_empty() {
        return Err(format!(
            "{group}/{version} serves no built-in kinds{typo} (versions of {group}: {})",
            versions_of(group).join(", ")
        ));
    }
    Err(format!(
        "{group}/{version} has no built-in kind {kind}{typo} (its kinds: {})",
        in_group
            .iter()
            .map(|b| b.kind)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The versions `group` serves kinds in.
fn versions_of(group: &str) -> Vec<&'static str> {
    let mut versions: Vec<&'static str> = BUILTIN_KINDS
        .iter()
        .filter(|b| b.group == group)
        .map(|b| b.version)
        .collect();
    versions.dedup();
    versions
}

/// The candidate within typo distance of `text` (case ignored), closest first.
fn closest<'a>(text: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = text.to_ascii_lowercase();
    let allowed = (wanted.len() / 3).max(2);
    candidates
        .map(|candidate| {
            (
                typo_distance(&wanted, &candidate.to_ascii_lowercase()),
                candidate,
            )
        })
        .filter(|(steps, _)| *steps <= allowed)
        .min_by_key(|(steps, _)| *steps)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over two rows, a swap of neighbours counting as
/// one step too (`Deploymnet` is one step from `Deployment`).
fn typo_distance(from: &str, to: &str) -> usize {
    let from: Vec<char> = from.chars().collect();
    let to: Vec<char> = to.chars().collect();
    let mut before_previous: Vec<usize> = Vec::new();
    let mut previous: Vec<usize> = (0..=to.len()).collect();
    for (i, f) in from.iter().enumerate() {
        let mut current = Vec::with_capacity(to.len() + 1);
        current.push(i + 1);
        for (j, t) in to.iter().enumerate() {
            let replace = previous[j] + usize::from(f != t);
            let mut steps = replace.min(previous[j + 1] + 1).min(current[j] + 1);
            let swapped = i > 0 && j > 0 && from[i - 1] == *t && *f == to[j - 1];
            if swapped {
                steps = steps.min(before_previous[j - 1] + 1);
            }
            current.push(steps);
        }
        before_previous = std::mem::replace(&mut previous, current);
    }
    previous[to.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_resolve_to_their_k8s_openapi_types() {
        assert_eq!(
            builtin_kind("apps", "v1", "Deployment").unwrap().path,
            "k8s_openapi::api::apps::v1::Deployment"
        );
        assert_eq!(
            builtin_kind("core", "v1", "ConfigMap").unwrap().path,
            "k8s_openapi::api::core::v1::ConfigMap"
        );
        assert_eq!(
            builtin_kind("apiregistration.k8s.io", "v1", "APIService")
                .unwrap()
                .path,
            "k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService"
        );
    }

    #[test]
    fn a_misspelt_kind_gets_the_nearest_name() {
        let err = builtin_kind("apps", "v1", "Deploymnet").unwrap_err();
        assert!(err.contains("did you mean Deployment?"), "{err}");
        let err = builtin_kind("apps", "v1", "deployment").unwrap_err();
        assert!(err.contains("did you mean Deployment?"), "{err}");
    }

    #[test]
    fn a_kind_of_another_group_or_version_is_named_where_it_is() {
        let err = builtin_kind("core", "v1", "Deployment").unwrap_err();
        assert!(
            err.contains("--group apps --version v1 --kind Deployment"),
            "{err}"
        );
        let err = builtin_kind("apps", "v1beta1", "Deployment").unwrap_err();
        assert!(
            err.contains("--group apps --version v1 --kind Deployment"),
            "{err}"
        );
        let err = builtin_kind("batch", "v2", "Thing").unwrap_err();
        assert!(err.contains("versions of batch: v1"), "{err}");
        assert!(!err.contains("did you mean"), "{err}");
    }
}
