//! `opkit::rbac::user_roles` against a real kube-apiserver: the admin,
//! editor and viewer ClusterRoles of a CRD are accepted as rendered, and a
//! user bound to each gets exactly its level (SubjectAccessReview, answered
//! by the apiserver's RBAC authorizer). Their aggregation into the built-in
//! `admin`, `edit` and `view` is done by kube-controller-manager, which the
//! bare control plane does not run: a generated project's `make test-e2e`
//! checks it on the local cluster (`templates/tests/it/make_test_e2e.rs`).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{CustomResource, CustomResourceExt};
use opkit_envtest::{ControlPlane, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "roles.example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
pub struct GadgetSpec {
    size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct GadgetStatus {
    ready: bool,
}

#[tokio::test]
async fn each_user_role_grants_its_level_and_carries_its_aggregation_label() {
    let plane = ControlPlane::start()
        .await
        .expect("start the control plane");
    plane
        .install_crds(&[Gadget::crd()])
        .await
        .expect("install the CRD");
    let client = plane.client().expect("admin client");
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for (role, user) in opkit::rbac::user_roles(&Gadget::crd(), "gadget-operator")
        .into_iter()
        .zip(["alice", "eddie", "vera"])
    {
        let stored = roles
            .create(&PostParams::default(), &role)
            .await
            .expect("the apiserver accepts the role");
        let name = stored.metadata.name.clone().unwrap_or_default();
        bindings
            .create(
                &PostParams::default(),
                &ClusterRoleBinding {
                    metadata: ObjectMeta {
                        name: Some(format!("{name}-{user}")),
                        ..ObjectMeta::default()
                    },
                    role_ref: RoleRef {
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        kind: "ClusterRole".into(),
                        name,
                    },
                    subjects: Some(vec![Subject {
                        kind: "User".into(),
                        name: user.into(),
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        ..Subject::default()
                    }]),
                },
            )
            .await
            .expect("bind the role");
    }

    // (user, verb, subresource, allowed)
    let cases = [
        ("vera", "get", "", true),
        ("vera", "list", "", true),
        ("vera", "watch", "", true),
        ("vera", "get", "status", true),
        ("vera", "create", "", false),
        ("vera", "delete", "", false),
        ("vera", "update", "status", false),
        ("eddie", "create", "", true),
        ("eddie", "patch", "", true),
        ("eddie", "delete", "", true),
        ("eddie", "deletecollection", "", false),
        ("eddie", "update", "status", false),
        ("alice", "deletecollection", "", true),
        ("alice", "create", "", true),
        ("alice", "get", "status", true),
        ("alice", "update", "status", false),
    ];
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    for (user, verb, subresource, allowed) in cases {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.into()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("roles.example.com".into()),
                    resource: Some("gadgets".into()),
                    subresource: (!subresource.is_empty()).then(|| subresource.into()),
                    verb: Some(verb.into()),
                    namespace: Some("default".into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        // The authorizer's RBAC cache follows the bindings within moments.
        let what = format!("{user} {verb} gadgets/{subresource}: allowed={allowed}");
        eventually(&what, Duration::from_secs(10), || async {
            let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
            (answer.status?.allowed == allowed).then_some(())
        })
        .await;
    }

    // Each carries the label its built-in role aggregates on.
    for (suffix, builtin) in [("admin", "admin"), ("editor", "edit"), ("viewer", "view")] {
        let role = roles
            .get(&format!("gadget-operator-gadget-{suffix}-role"))
            .await
            .expect("the role");
        let labels = role.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get(&format!("rbac.authorization.k8s.io/aggregate-to-{builtin}"))
                .map(String::as_str),
            Some("true"),
            "{suffix}: {labels:?}"
        );
    }
    plane.stop();
}
