//! The reconciler of `Memcached`: a Deployment of `spec.size` memcached
//! pods and a Service in front of them, both owned by the Memcached;
//! status conditions `Available`, `Progressing` and `Degraded`; and a
//! finalizer that deletes both and records an Event when the Memcached is
//! deleted.
//!
//! # What `Available` means
//!
//! The reconciler reports what it can observe: the Deployment's own
//! status, which kube-controller-manager's Deployment controller writes.
//! `Available` is `True` once that status reports `spec.size` available
//! replicas for the Deployment's current generation. Until it does (and
//! where no Deployment controller runs at all, as under `opkit_envtest`)
//! the Memcached is `Progressing` with reason `WaitingForReplicas` — never
//! `Available` on the strength of the spec alone.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ObjectMeta};
use kube::{Resource, ResourceExt};
use opkit::Controller;
use opkit::client::{self, FinalizerEvent, IgnoreNotFound};
use opkit::conditions::{self, ConditionStatus};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

use crate::api::memcached::{AVAILABLE, DEGRADED, Memcached, MemcachedStatus, PROGRESSING};

/// The finalizer that lets the reconciler clean up before a Memcached goes.
pub const FINALIZER: &str = "cache.example.com/finalizer";
/// The memcached image the Deployment runs, unless [`IMAGE_ENV`] names another.
pub const IMAGE: &str = "memcached:1.6.38-alpine";
/// The environment variable that overrides [`IMAGE`] (e.g. a mirror, or the
/// locally built image of opkit's local cluster, which has no registry).
pub const IMAGE_ENV: &str = "MEMCACHED_IMAGE";

/// The memcached image: `$MEMCACHED_IMAGE` when set and not empty, else [`IMAGE`].
pub fn image() -> String {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|image| !image.is_empty())
        .unwrap_or_else(|| IMAGE.to_owned())
}
/// The port memcached listens on.
pub const PORT: i32 = 11211;

/// Reconciles Memcached objects into a Deployment and a Service.
///
/// The attribute is the single source of the controller's wiring and of
/// its RBAC rules (`deploy/03-rbac.yaml`): it reads Memcacheds and writes
/// their status and finalizers, owns Deployments and Services (a change
/// to one wakes its Memcached), writes both, and records Events.
#[derive(Controller)]
#[controller(
    for = Memcached,
    owns(Deployment, Service),
    rbac(create, update, patch, delete on Deployment, Service),
    status,
    finalizer,
    events,
    field_manager = "memcached-operator"
)]
pub struct MemcachedReconciler;

impl Reconcile for MemcachedReconciler {
    type Object = Memcached;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Memcached>,
    ) -> Result<Action, ReconcileError> {
        // Adds the finalizer before the first apply; on deletion runs the
        // cleanup, then removes it. Handed the read itself: a Memcached
        // that is gone needs nothing, and one being deleted whose body no
        // longer decodes still lets go.
        client::finalizer(
            &ctx.object_api(),
            FINALIZER,
            ctx.object().await,
            |event| async {
                match event {
                    FinalizerEvent::Apply(memcached) => apply(&req, &memcached, ctx).await,
                    FinalizerEvent::Cleanup(memcached) => {
                        finalize(&memcached, ctx).await?;
                        Ok(Action::done())
                    }
                    // Its Deployment and Service are owned: the garbage
                    // collector removes them with it.
                    FinalizerEvent::CleanupUndecodable(_) => Ok(Action::done()),
                }
            },
        )
        .await
    }

    /// A failed reconcile sets `Degraded` with the error and records a
    /// warning Event; the failure is then retried with backoff.
    async fn on_error(&self, req: &Request, error: &ReconcileError, ctx: &Context<Memcached>) {
        let Ok(Some(memcached)) = ctx.object().await else {
            return;
        };
        ctx.recorder().warning(
            &*memcached,
            "ReconcileFailed",
            "Reconciling",
            &error.to_string(),
        );
        let mut status = memcached.status.clone().unwrap_or_default();
        let changed = conditions::set(
            &mut status.conditions,
            conditions::new(
                DEGRADED,
                ConditionStatus::True,
                "ReconcileFailed",
                error.to_string(),
            )
            .observed_generation(memcached.meta().generation),
        );
        if changed && let Err(e) = client::patch_status(&ctx.object_api(), &req.name, &status).await
        {
            tracing::warn!(%req, error = %e, "cannot report the Degraded condition");
        }
    }
}

/// Brings the Deployment and the Service to what `memcached` wants, and
/// reports what is observed in its status.
async fn apply(
    req: &Request,
    memcached: &Memcached,
    ctx: &Context<Memcached>,
) -> Result<Action, ReconcileError> {
    // Server-side applies as the controller's field manager; an
    // OwnerError from `?` is terminal (another owner will not let go).
    let mut deployment = desired_deployment(memcached);
    client::set_controller_reference(memcached, &mut deployment)?;
    let deployment = ctx.apply(&deployment).await?;
    let mut service = desired_service(memcached);
    client::set_controller_reference(memcached, &mut service)?;
    ctx.apply(&service).await?;

    let status = observed_status(memcached, &deployment);
    if memcached.status.as_ref() != Some(&status) {
        tracing::info!(
            %req,
            size = memcached.spec.size,
            available = conditions::is_true(&status.conditions, AVAILABLE),
            "status updated"
        );
        client::patch_status(&ctx.object_api(), &req.name, &status).await?;
    }
    Ok(Action::done())
}

/// Deletes the Deployment and the Service (a cluster's garbage collector
/// would too; doing it here makes the cleanup explicit and visible) and
/// records an Event.
async fn finalize(memcached: &Memcached, ctx: &Context<Memcached>) -> Result<(), ReconcileError> {
    let namespace = memcached.namespace();
    let name = memcached.name_any();
    ctx.api::<Deployment>(namespace.as_deref())
        .delete(&name, &DeleteParams::default())
        .await
        .ignore_not_found()?;
    ctx.api::<Service>(namespace.as_deref())
        .delete(&name, &DeleteParams::default())
        .await
        .ignore_not_found()?;
    tracing::info!(namespace, name, "finalized: Deployment and Service deleted");
    ctx.recorder().normal(
        memcached,
        "Finalized",
        "Deleting",
        &format!("deleted Deployment and Service {name}; removing the finalizer"),
    );
    Ok(())
}

/// The labels of a Memcached's pods (and the Deployment's selector).
pub fn labels(memcached: &Memcached) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "memcached".to_owned()),
        (
            "app.kubernetes.io/instance".to_owned(),
            memcached.name_any(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            crate::NAME.to_owned(),
        ),
    ])
}

/// The Deployment a Memcached wants: `spec.size` memcached pods that run
/// under the restricted Pod Security Standard.
pub fn desired_deployment(memcached: &Memcached) -> Deployment {
    let labels = labels(memcached);
    let quantity = |q: &str| Quantity(q.to_owned());
    Deployment {
        metadata: ObjectMeta {
            name: Some(memcached.name_any()),
            namespace: memcached.namespace(),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(memcached.spec.size),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".to_owned(),
                            ..SeccompProfile::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![Container {
                        name: "memcached".to_owned(),
                        image: Some(image()),
                        command: Some(
                            ["memcached", "--memory-limit=64", "-o", "modern", "-v"]
                                .map(str::to_owned)
                                .to_vec(),
                        ),
                        ports: Some(vec![ContainerPort {
                            name: Some("memcached".to_owned()),
                            container_port: PORT,
                            ..ContainerPort::default()
                        }]),
                        resources: Some(ResourceRequirements {
                            requests: Some(BTreeMap::from([
                                ("cpu".to_owned(), quantity("50m")),
                                ("memory".to_owned(), quantity("64Mi")),
                            ])),
                            limits: Some(BTreeMap::from([
                                ("cpu".to_owned(), quantity("500m")),
                                ("memory".to_owned(), quantity("128Mi")),
                            ])),
                            ..ResourceRequirements::default()
                        }),
                        security_context: Some(SecurityContext {
                            run_as_non_root: Some(true),
                            run_as_user: Some(1001),
                            allow_privilege_escalation: Some(false),
                            capabilities: Some(Capabilities {
                                drop: Some(vec!["ALL".to_owned()]),
                                ..Capabilities::default()
                            }),
                            ..SecurityContext::default()
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The Service in front of a Memcached's pods.
pub fn desired_service(memcached: &Memcached) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(memcached.name_any()),
            namespace: memcached.namespace(),
            labels: Some(labels(memcached)),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(labels(memcached)),
            ports: Some(vec![ServicePort {
                name: Some("memcached".to_owned()),
                port: PORT,
                target_port: Some(IntOrString::String("memcached".to_owned())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The status a Memcached gets from what its Deployment reports (see the
/// module docs for what `Available` means).
pub fn observed_status(memcached: &Memcached, deployment: &Deployment) -> MemcachedStatus {
    let size = memcached.spec.size;
    let generation = memcached.meta().generation;
    let reported = deployment.status.as_ref();
    let observed = reported
        .and_then(|s| s.observed_generation)
        .zip(deployment.metadata.generation)
        .is_some_and(|(observed, current)| observed >= current);
    let available = reported.and_then(|s| s.available_replicas).unwrap_or(0);
    let name = memcached.name_any();

    let mut status = memcached.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    let set = |status: &mut MemcachedStatus, type_, value, reason: &str, message: String| {
        conditions::set(
            &mut status.conditions,
            conditions::new(type_, value, reason, message).observed_generation(generation),
        );
    };
    if observed && available >= size {
        let message = format!("Deployment {name} has {available}/{size} replicas available");
        set(
            &mut status,
            AVAILABLE,
            ConditionStatus::True,
            "MinimumReplicasAvailable",
            message,
        );
        set(
            &mut status,
            PROGRESSING,
            ConditionStatus::False,
            "ReconcileComplete",
            format!("Deployment {name} matches spec.size {size}"),
        );
    } else {
        let message = if observed {
            format!("Deployment {name} has {available}/{size} replicas available")
        } else {
            format!(
                "Deployment {name} wants {size} replicas; waiting for the Deployment controller to report them"
            )
        };
        set(
            &mut status,
            AVAILABLE,
            ConditionStatus::False,
            "WaitingForReplicas",
            message.clone(),
        );
        set(
            &mut status,
            PROGRESSING,
            ConditionStatus::True,
            "WaitingForReplicas",
            message,
        );
    }
    set(
        &mut status,
        DEGRADED,
        ConditionStatus::False,
        "ReconcileSucceeded",
        "the Deployment and the Service are applied".to_owned(),
    );
    status
}
