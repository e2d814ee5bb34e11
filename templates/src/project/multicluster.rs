//! `cargo opkit new --multicluster <provider>`: a hub operator whose
//! kinds are reconciled in every member cluster a provider engages (see
//! `opkit::multicluster`). What it changes in the generated project:
//! opkit's `multicluster` feature, the manager's provider flags and setup,
//! the hub's RBAC for the provider's source, `multicluster` on each kind's
//! controller (also for kinds `create api` adds later, from the `PROJECT`
//! file), and tests that run a hub and a member control plane.

use crate::error::ScaffoldError;
use crate::render::Values;

/// Where a multicluster project's member clusters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterProvider {
    /// Secrets in a hub namespace, each holding a member's kubeconfig
    /// (`opkit::multicluster::KubeconfigSecrets`, multicluster-runtime's
    /// kubeconfig provider).
    KubeconfigSecrets,
    /// The Cluster Inventory API's `ClusterProfile`s on the hub, reached
    /// through the access providers of a provider file
    /// (`opkit::multicluster::ClusterProfiles`).
    ClusterProfiles,
    /// A fixed set named on the command line, each with its kubeconfig
    /// file (`opkit::multicluster::StaticClusters`, multicluster-runtime's
    /// file provider).
    Static,
}

impl ClusterProvider {
    /// Every provider, in the order the help lists them.
    pub const ALL: [Self; 3] = [Self::KubeconfigSecrets, Self::ClusterProfiles, Self::Static];

    /// The flag's value, also the `PROJECT` file's.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KubeconfigSecrets => "kubeconfig-secrets",
            Self::ClusterProfiles => "cluster-profiles",
            Self::Static => "static",
        }
    }

    /// The provider named `text`, or an error listing the names.
    pub fn parse(text: &str) -> Result<Self, ScaffoldError> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| ScaffoldError::UnknownClusterProvider {
                given: text.to_owned(),
                known: Self::ALL.map(Self::as_str).join(", "),
            })
    }
}

/// The placeholders of the project templates: empty without
/// `--multicluster`, so a single-cluster project does not change.
pub(super) fn project_values(
    values: &mut Values,
    provider: Option<ClusterProvider>,
) -> Result<(), ScaffoldError> {
    let Some(provider) = provider else {
        values
            .set("multicluster_arg", "")
            .set("multicluster_setup", "")
            .set("multicluster_rbac", "")
            .set("multicluster_items", "")
            .set("multicluster_manifests", "")
            .set("multicluster_readme", "");
        return Ok(());
    };
    // With kubeconfig Secrets, reading them is the hub's only extra right,
    // granted in the fleet namespace alone (a Role, `items` and
    // `manifests`), not cluster-wide.
    let (arg, setup, rbac, readme, items, manifests) = match provider {
        ClusterProvider::KubeconfigSecrets => (
            r#"    /// The hub namespace whose Secrets labelled `sigs.k8s.io/multicluster-runtime-kubeconfig=true`
    /// hold the member clusters' kubeconfigs (key `kubeconfig`): a cluster per Secret, named like it.
    /// The operator may read Secrets there only: change `FLEET_NAMESPACE` in `src/lib.rs`
    /// and render the manifests again (`cargo opkit manifests`) to use another.
    #[arg(long, default_value = {{crate_name}}::FLEET_NAMESPACE)]
    fleet_namespace: String,
"#,
            r#"    // The member clusters: one per kubeconfig Secret in the hub's fleet
    // namespace, engaged when its Secret appears, rotated when it changes,
    // disengaged when it goes. The controllers marked `multicluster` run
    // in every member.
    let hub = manager.client().clone();
    manager.set_cluster_provider(opkit::multicluster::KubeconfigSecrets::new(
        hub,
        args.fleet_namespace,
    ));
"#,
            "",
            r#"
## Member clusters

This is a hub operator (`--multicluster kubeconfig-secrets`): it runs in
the hub, and the controllers marked `multicluster` reconcile their kinds
in every member cluster. A member joins when a Secret labelled
`sigs.k8s.io/multicluster-runtime-kubeconfig=true` with its kubeconfig
under the key `kubeconfig` appears in the hub's fleet namespace
(`--fleet-namespace`, default `fleet`), is rotated when the Secret
changes, and leaves when it is deleted:

```sh
kubectl create namespace fleet
kubectl -n fleet create secret generic member-1 --from-file=kubeconfig=member-1.kubeconfig
kubectl -n fleet label secret member-1 sigs.k8s.io/multicluster-runtime-kubeconfig=true
```

Create the fleet namespace before `make deploy` (`kubectl create
namespace fleet`): `deploy/03-rbac.yaml` lets the operator read Secrets
there, and nowhere else, with a Role and its RoleBinding in that
namespace (`fleet_rules` in `src/lib.rs`). The namespace and its Secrets
are yours: `make undeploy` removes the Role, never them. To use another
namespace, change `FLEET_NAMESPACE` in `src/lib.rs` and render the
manifests again (`cargo opkit manifests`).

What the member credentials must allow: the controllers' rules, the
ClusterRole `deploy/03-rbac.yaml` renders, bound in each member to the
kubeconfig's identity (the fleet Role is the hub's and is not needed
there). Install the CRDs (`deploy/01-crds.yaml`) in every member.
"#,
            KUBECONFIG_SECRETS_ITEMS,
            KUBECONFIG_SECRETS_MANIFESTS,
        ),
        ClusterProvider::ClusterProfiles => (
            r#"    /// The access-provider file (multicluster-runtime's `--clusterprofile-provider-file` JSON):
    /// how to get credentials for a `ClusterProfile`'s cluster.
    #[arg(long, default_value = "/etc/clusterprofile/providers.json")]
    clusterprofile_provider_file: PathBuf,
    /// Engage only the ClusterProfiles of this hub namespace (default: all).
    #[arg(long)]
    clusterprofile_namespace: Option<String>,
"#,
            r#"    // The member clusters: the hub's ClusterProfiles (Cluster Inventory
    // API), each engaged once its control plane is healthy, through the
    // access provider the file configures. The controllers marked
    // `multicluster` run in every member.
    let access = opkit::multicluster::ClusterProfileAccess::from_file(&args.clusterprofile_provider_file)?;
    let mut profiles = opkit::multicluster::ClusterProfiles::new(manager.client().clone(), access);
    if let Some(namespace) = args.clusterprofile_namespace {
        profiles = profiles.namespace(namespace);
    }
    manager.set_cluster_provider(profiles);
"#,
            "        // the hub's ClusterProfiles (Cluster Inventory API)\n        .allow_resource(\"multicluster.x-k8s.io\", \"clusterprofiles\", &[rbac::Verb::Get, rbac::Verb::List, rbac::Verb::Watch])\n",
            r#"
## Member clusters

This is a hub operator (`--multicluster cluster-profiles`): it runs in the
hub, and the controllers marked `multicluster` reconcile their kinds in
every member cluster. The members are the hub's `ClusterProfile`s
(`multicluster.x-k8s.io/v1alpha1`, the Cluster Inventory API), each
engaged once its `ControlPlaneHealthy` condition is `True`, with the
credentials of the first access provider of
`--clusterprofile-provider-file` that the profile lists (the same JSON as
multicluster-runtime's). Mount that file and the provider's plugin binary
into the pod.

What the member credentials must allow: the controllers' rules, the
ClusterRole `deploy/03-rbac.yaml` renders (its ClusterProfile rule is the
hub's), granted in each member to the identity the access provider
yields. Install the CRDs (`deploy/01-crds.yaml`) in every member.
"#,
            "",
            "",
        ),
        ClusterProvider::Static => (
            r#"    /// A member cluster, as NAME=KUBECONFIG (the current context of that kubeconfig file);
    /// repeat for each member.
    #[arg(long = "member", value_name = "NAME=KUBECONFIG", value_parser = |member: &str| {
        member
            .split_once('=')
            .filter(|(name, kubeconfig)| !name.is_empty() && !kubeconfig.is_empty())
            .map(|(name, kubeconfig)| (name.to_owned(), PathBuf::from(kubeconfig)))
            .ok_or_else(|| format!("expected NAME=KUBECONFIG, got {member:?}"))
    })]
    members: Vec<(String, PathBuf)>,
"#,
            r#"    // The member clusters: a fixed set, each named on the command line
    // with its kubeconfig file (`--member east=/etc/fleet/east.kubeconfig`),
    // engaged when the manager starts. The controllers marked
    // `multicluster` run in every member.
    if args.members.is_empty() {
        tracing::warn!("no --member given: no member cluster will be reconciled");
    }
    let mut members = opkit::multicluster::StaticClusters::new();
    for (name, kubeconfig) in args.members {
        members = members.kubeconfig(name, kubeconfig);
    }
    manager.set_cluster_provider(members);
"#,
            "",
            r#"
## Member clusters

This is a hub operator (`--multicluster static`): it runs in the hub, and
the controllers marked `multicluster` reconcile their kinds in every
member cluster. The members are named on the command line, each with a
kubeconfig file whose current context reaches it, and are engaged when
the manager starts (restart it to change the set):

```sh
cargo run -- --member east=east.kubeconfig --member west=west.kubeconfig
```

In a cluster, keep the kubeconfigs in a Secret, mount it into the pod
(e.g. at `/etc/fleet`), and add `--member east=/etc/fleet/east` for each
key to the Deployment's `args`. A member whose file cannot be read is
logged and left out; the others are engaged.

What the member credentials must allow: the controllers' rules, the
ClusterRole `deploy/03-rbac.yaml` renders, bound in each member to the
kubeconfig's identity. Install the CRDs (`deploy/01-crds.yaml`) in every
member. The hub needs nothing more.
"#,
            "",
            "",
        ),
    };
    // The flag and the items name the project (`{{crate_name}}::...`,
    // `{{name}}`): rendered with the project's values before they go in.
    let template = format!("--multicluster {}", provider.as_str());
    let arg = values.render(&template, arg)?;
    let items = values.render(&template, items)?;
    values
        .set("multicluster_arg", arg)
        .set("multicluster_setup", setup)
        .set("multicluster_rbac", rbac)
        .set("multicluster_items", items)
        .set("multicluster_manifests", manifests)
        .set("multicluster_readme", readme);
    Ok(())
}

/// `src/lib.rs`'s items for kubeconfig Secrets: the fleet namespace and
/// the rules the operator has there.
const KUBECONFIG_SECRETS_ITEMS: &str = r#"
/// The hub namespace whose Secrets hold the member clusters' kubeconfigs
/// (`--fleet-namespace`'s default). The operator may read Secrets there
/// only: [`fleet_rules`], rendered as a Role of this namespace.
pub const FLEET_NAMESPACE: &str = "fleet";
/// The Role (and its RoleBinding) of [`fleet_rules`] in [`FLEET_NAMESPACE`].
pub const FLEET_ROLE: &str = "{{name}}-fleet-secrets";

/// The RBAC rules the operator has in [`FLEET_NAMESPACE`] alone: reading
/// the members' kubeconfig Secrets.
pub fn fleet_rules() -> Rules {
    Rules::new().allow::<k8s_openapi::api::core::v1::Secret>(&rbac::Verb::READ)
}
"#;

/// `manifests()`'s documents for kubeconfig Secrets:
/// [`KUBECONFIG_SECRETS_ITEMS`]'s rules as a Role in the fleet namespace,
/// bound to the operator's ServiceAccount. Not the namespace itself: it
/// holds the members' Secrets, which `make undeploy` must not delete.
const KUBECONFIG_SECRETS_MANIFESTS: &str = r#"        // Reading the members' kubeconfig Secrets in their namespace (a
        // Role), not in every namespace. The namespace is the user's (it
        // holds their Secrets): created before `make deploy`, kept by
        // `make undeploy`.
        .push(&fleet_rules().role(FLEET_ROLE, FLEET_NAMESPACE))?
        .push(&rbac::role_binding(
            FLEET_ROLE,
            FLEET_ROLE,
            SERVICE_ACCOUNT,
            NAMESPACE,
            FLEET_NAMESPACE,
        ))?
"#;

/// The placeholders of a kind's templates (`create api`, and `new`'s first
/// kind): with `multicluster`, the controller runs in every member, and
/// its test starts a hub and a member and engages the member as the
/// provider would.
pub(super) fn api_values(values: &mut Values, multicluster: bool) {
    if !multicluster {
        values
            .set("multicluster_attr", "")
            .set("test_hub", "")
            .set("test_manager_client", "client.clone()")
            .set("test_provider", "")
            .set("test_engage", "");
        return;
    }
    values
        .set("multicluster_attr", ", multicluster")
        .set(
            "test_hub",
            r#"    // The hub the operator runs in; the control plane above is the
    // member cluster the objects live in, engaged below as the project's
    // provider would engage it.
    let hub = ControlPlane::start()
        .await
        .expect("start the hub's etcd and kube-apiserver");
"#,
        )
        .set(
            "test_manager_client",
            r#"hub.client().expect("hub admin client")"#,
        )
        .set(
            "test_provider",
            r#"    let (members, fleet) = opkit::multicluster::ClusterSet::new();
    manager.set_cluster_provider(members);
"#,
        )
        .set(
            "test_engage",
            r#"    fleet
        .add("member-1", client.clone())
        .await
        .expect("engage the member");
"#,
        );
}
