//! [`ClusterProfileAccess`]: the access providers an operator can reach a
//! [`ClusterProfile`]'s cluster through, each an exec plugin (the Cluster
//! Inventory API's provider file, `--clusterprofile-provider-file`), and
//! the kubeconfig a profile makes with them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext, NamedExtension,
};
use serde::{Deserialize, Serialize};

use super::cluster_profile::{AccessProvider, ClusterProfile, ClusterProfileStatus};
use super::credentials;
use super::error::MultiClusterError;
use crate::cluster_request::ClusterName;

/// KEP-5339's extension of an access provider's cluster: arguments the
/// exec plugin gets for this cluster (a JSON list of strings).
pub const ADDITIONAL_ARGS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";

/// KEP-5339's extension of an access provider's cluster: environment
/// variables the exec plugin gets for this cluster (a JSON object of
/// strings).
pub const ADDITIONAL_ENVS_EXTENSION: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";

/// The access providers an operator can use, in order of preference, each
/// with the exec plugin that gives it credentials: the same JSON as the
/// Cluster Inventory API's provider file (`access.NewFromFile` in Go), so
/// one file serves Go and Rust consumers.
///
/// A profile is reached through the first provider of this list that its
/// `status.accessProviders` (or the older `credentialProviders`) names:
/// its API server and CA from the profile, its credentials from the
/// plugin, run non-interactively whenever the client needs a token (and
/// handed the cluster's settings when `provideClusterInfo` is set).
///
/// ```
/// use opkit::multicluster::ClusterProfileAccess;
///
/// let access = ClusterProfileAccess::from_json(r#"{
///   "providers": [{
///     "name": "kubeconfig-secretreader",
///     "execConfig": {
///       "apiVersion": "client.authentication.k8s.io/v1",
///       "command": "/plugin/bin/kubeconfig-secretreader-plugin",
///       "provideClusterInfo": true
///     },
///     "profileSourcedEnvVarsPolicy": "AppendIfNotExists"
///   }]
/// }"#)?;
/// assert_eq!(access.plugins()[0].name, "kubeconfig-secretreader");
/// # Ok::<(), opkit::multicluster::MultiClusterError>(())
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterProfileAccess {
    /// The plugins, most preferred first.
    #[serde(rename = "providers")]
    plugins: Vec<AccessPlugin>,
}

/// One access provider the operator can use: its name (as profiles list
/// it) and the exec plugin that gives its credentials.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessPlugin {
    /// The access provider's name.
    pub name: String,
    /// The plugin, as a kubeconfig user's `exec` (`command`, `args`,
    /// `env`, `apiVersion`, `provideClusterInfo`).
    pub exec_config: ExecConfig,
    /// Whether a profile may add arguments ([`ADDITIONAL_ARGS_EXTENSION`]).
    #[serde(default, rename = "profileSourcedCLIArgsPolicy")]
    pub profile_args: ProfileArgsPolicy,
    /// Whether a profile may add environment variables
    /// ([`ADDITIONAL_ENVS_EXTENSION`]).
    #[serde(default, rename = "profileSourcedEnvVarsPolicy")]
    pub profile_envs: ProfileEnvsPolicy,
}

/// What a profile's [`ADDITIONAL_ARGS_EXTENSION`] does to the plugin's
/// arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProfileArgsPolicy {
    /// Nothing (the default).
    #[default]
    #[serde(alias = "")]
    Ignore,
    /// The profile's arguments follow the plugin's.
    Append,
}

/// What a profile's [`ADDITIONAL_ENVS_EXTENSION`] does to the plugin's
/// environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProfileEnvsPolicy {
    /// Nothing (the default).
    #[default]
    #[serde(alias = "")]
    Ignore,
    /// The profile's variables are added; where both set one, the
    /// plugin's value stays.
    AppendIfNotExists,
    /// The profile's variables are added; where both set one, the
    /// profile's value wins.
    Replace,
}

impl AccessPlugin {
    /// The access provider `name`, its credentials from `exec`; profiles
    /// add no arguments or environment.
    pub fn new(name: impl Into<String>, exec: ExecConfig) -> Self {
        Self {
            name: name.into(),
            exec_config: exec,
            profile_args: ProfileArgsPolicy::Ignore,
            profile_envs: ProfileEnvsPolicy::Ignore,
        }
    }

    /// What a profile's extra arguments do (default: ignored).
    pub fn profile_args(mut self, policy: ProfileArgsPolicy) -> Self {
        self.profile_args = policy;
        self
    }

    /// What a profile's extra environment variables do (default: ignored).
    pub fn profile_envs(mut self, policy: ProfileEnvsPolicy) -> Self {
        self.profile_envs = policy;
        self
    }
}

impl ClusterProfileAccess {
    /// No access provider yet (add them with [`plugin`](Self::plugin)).
    pub fn new() -> Self {
        Self::default()
    }

    /// `plugin` too, after those added before.
    pub fn plugin(mut self, plugin: AccessPlugin) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// The access providers of a provider file's JSON.
    pub fn from_json(json: &str) -> Result<Self, MultiClusterError> {
        Self::parse(json, || "the access provider configuration".to_owned())
    }

    /// The access providers of the provider file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, MultiClusterError> {
        let path = path.as_ref();
        let origin = || path.display().to_string();
        let json = std::fs::read_to_string(path).map_err(|e| MultiClusterError::AccessConfig {
            origin: origin(),
            reason: e.to_string(),
        })?;
        Self::parse(&json, origin)
    }

    /// The access providers of `json`; `origin` names it in the error.
    fn parse(json: &str, origin: impl Fn() -> String) -> Result<Self, MultiClusterError> {
        serde_json::from_str(json).map_err(|e| MultiClusterError::AccessConfig {
            origin: origin(),
            reason: e.to_string(),
        })
    }

    /// The access providers, most preferred first.
    pub fn plugins(&self) -> &[AccessPlugin] {
        &self.plugins
    }

    /// The kubeconfig that reaches `profile`'s cluster: its server and
    /// trust from the first of these access providers that the profile
    /// lists, its credentials from that provider's plugin (with the
    /// profile's extra arguments and environment, as the provider's
    /// policies allow). An error names the profile and what is missing.
    pub fn kubeconfig_for(
        &self,
        profile: &ClusterProfile,
    ) -> Result<Kubeconfig, MultiClusterError> {
        let cluster = profile_cluster_name(profile);
        let invalid = |reason: String| credentials::credentials(&cluster, "ClusterProfile", reason);
        let none = ClusterProfileStatus::default();
        let status = profile.status.as_ref().unwrap_or(&none);
        let (plugin, access) = self
            .plugins
            .iter()
            .find_map(|p| status.access_provider(&p.name).map(|a| (p, a)))
            .ok_or_else(|| {
                let listed: Vec<&str> = status
                    .access_providers
                    .iter()
                    .chain(&status.credential_providers)
                    .map(|p| p.name.as_str())
                    .collect();
                let ours: Vec<&str> = self.plugins.iter().map(|p| p.name.as_str()).collect();
                invalid(format!(
                    "it lists no access provider this operator is configured for \
                     (it lists {listed:?}; configured: {ours:?})"
                ))
            })?;
        if access
            .cluster
            .server
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            return Err(invalid(format!(
                "its access provider {:?} names no server",
                access.name
            )));
        }
        let exec = plugin_for(plugin, access).map_err(invalid)?;
        Ok(kubeconfig(access, exec))
    }

    /// The `kube::Config` that reaches `profile`'s cluster (see
    /// [`kubeconfig_for`](Self::kubeconfig_for)): `kube::Client::try_from`
    /// it to talk to the cluster outside a fleet.
    pub async fn config_for(
        &self,
        profile: &ClusterProfile,
    ) -> Result<kube::Config, MultiClusterError> {
        let kubeconfig = self.kubeconfig_for(profile)?;
        let cluster = profile_cluster_name(profile);
        credentials::config_of(&cluster, kubeconfig, None, "ClusterProfile").await
    }
}

/// `kubeconfig` as bytes that are equal exactly when two kubeconfigs are:
/// its JSON with every object's keys sorted (an exec plugin's environment
/// entries are maps, whose order is not kept).
pub(super) fn identity_of(kubeconfig: &Kubeconfig) -> Result<Vec<u8>, serde_json::Error> {
    fn sorted(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let entries: BTreeMap<String, serde_json::Value> =
                    map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
                serde_json::Value::Object(entries.into_iter().collect())
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(sorted).collect())
            }
            other => other,
        }
    }
    serde_json::to_vec(&sorted(serde_json::to_value(kubeconfig)?))
}

/// The cluster name of `profile` in a fleet: `namespace/name`, as
/// multicluster-runtime's provider names it.
pub(super) fn profile_cluster_name(profile: &ClusterProfile) -> ClusterName {
    let namespace = profile.metadata.namespace.as_deref().unwrap_or_default();
    let name = profile.metadata.name.as_deref().unwrap_or_default();
    ClusterName::new(format!("{namespace}/{name}"))
}

/// `plugin`'s exec configuration for `access`'s cluster: never
/// interactive, with the cluster's extra arguments and environment as
/// the plugin's policies allow.
fn plugin_for(plugin: &AccessPlugin, access: &AccessProvider) -> Result<ExecConfig, String> {
    let mut exec = plugin.exec_config.clone();
    exec.interactive_mode = Some(ExecInteractiveMode::Never);
    for extension in &access.cluster.extensions {
        match extension.name.as_str() {
            ADDITIONAL_ARGS_EXTENSION if plugin.profile_args == ProfileArgsPolicy::Append => {
                let args: Vec<String> = serde_json::from_value(extension.extension.clone())
                    .map_err(|e| {
                        format!("{ADDITIONAL_ARGS_EXTENSION} is not a list of strings: {e}")
                    })?;
                exec.args.get_or_insert_with(Vec::new).extend(args);
            }
            ADDITIONAL_ENVS_EXTENSION if plugin.profile_envs != ProfileEnvsPolicy::Ignore => {
                let envs: BTreeMap<String, String> =
                    serde_json::from_value(extension.extension.clone()).map_err(|e| {
                        format!("{ADDITIONAL_ENVS_EXTENSION} is not an object of strings: {e}")
                    })?;
                merge_envs(&mut exec, envs, plugin.profile_envs);
            }
            _ => {}
        }
    }
    Ok(exec)
}

/// Adds `profile`'s variables to `exec`'s environment: where both set one,
/// `policy` says whose value stays. The plugin's variables keep their
/// order; the profile's new ones follow, by name.
fn merge_envs(
    exec: &mut ExecConfig,
    mut profile: BTreeMap<String, String>,
    policy: ProfileEnvsPolicy,
) {
    let env = exec.env.get_or_insert_with(Vec::new);
    for entry in env.iter_mut() {
        let Some(name) = entry.get("name").cloned() else {
            continue;
        };
        if let Some(value) = profile.remove(&name)
            && policy == ProfileEnvsPolicy::Replace
        {
            entry.insert("value".to_owned(), value);
        }
    }
    env.extend(profile.into_iter().map(|(name, value)| {
        HashMap::from([("name".to_owned(), name), ("value".to_owned(), value)])
    }));
}

/// A kubeconfig of one context: `access`'s cluster, a user authenticated
/// by `exec`.
fn kubeconfig(access: &AccessProvider, exec: ExecConfig) -> Kubeconfig {
    let settings = &access.cluster;
    let cluster = Cluster {
        server: settings.server.clone(),
        insecure_skip_tls_verify: settings.insecure_skip_tls_verify,
        certificate_authority_data: settings.certificate_authority_data.clone(),
        proxy_url: settings.proxy_url.clone(),
        disable_compression: settings.disable_compression,
        tls_server_name: settings.tls_server_name.clone(),
        extensions: (!settings.extensions.is_empty()).then(|| {
            settings
                .extensions
                .iter()
                .map(|e| NamedExtension {
                    name: e.name.clone(),
                    extension: e.extension.clone(),
                })
                .collect()
        }),
        ..Cluster::default()
    };
    let name = access.name.clone();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                exec: Some(exec),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multicluster::cluster_profile::{AccessCluster, AccessExtension};

    fn plugin() -> AccessPlugin {
        AccessPlugin::new(
            "token",
            ExecConfig {
                api_version: Some("client.authentication.k8s.io/v1".to_owned()),
                command: Some("/bin/token".to_owned()),
                args: Some(vec!["--plain".to_owned()]),
                env: Some(vec![HashMap::from([
                    ("name".to_owned(), "MODE".to_owned()),
                    ("value".to_owned(), "plugin".to_owned()),
                ])]),
                ..ExecConfig::default()
            },
        )
    }

    fn profile(providers: Vec<AccessProvider>) -> ClusterProfile {
        let mut profile = ClusterProfile::new("east", Default::default());
        profile.metadata.namespace = Some("fleet".to_owned());
        profile.status = Some(ClusterProfileStatus {
            access_providers: providers,
            ..ClusterProfileStatus::default()
        });
        profile
    }

    fn provider(name: &str, extensions: Vec<AccessExtension>) -> AccessProvider {
        AccessProvider {
            name: name.to_owned(),
            cluster: AccessCluster {
                server: Some("https://east.example:6443".to_owned()),
                certificate_authority_data: Some("Q0E=".to_owned()),
                extensions,
                ..AccessCluster::default()
            },
        }
    }

    fn envs(exec: &ExecConfig) -> Vec<(String, String)> {
        exec.env
            .iter()
            .flatten()
            .map(|e| (e["name"].clone(), e["value"].clone()))
            .collect()
    }

    fn exec_of(kubeconfig: &Kubeconfig) -> &ExecConfig {
        kubeconfig.auth_infos[0]
            .auth_info
            .as_ref()
            .and_then(|a| a.exec.as_ref())
            .expect("an exec user")
    }

    #[test]
    fn the_first_configured_provider_the_profile_lists_is_used() {
        let access = ClusterProfileAccess::new()
            .plugin(AccessPlugin::new("oidc", ExecConfig::default()))
            .plugin(plugin());
        let kubeconfig = access
            .kubeconfig_for(&profile(vec![
                provider("other", vec![]),
                provider("token", vec![]),
            ]))
            .expect("a kubeconfig");
        let cluster = kubeconfig.clusters[0].cluster.as_ref().expect("a cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://east.example:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let exec = exec_of(&kubeconfig);
        assert_eq!(exec.command.as_deref(), Some("/bin/token"));
        assert_eq!(exec.interactive_mode, Some(ExecInteractiveMode::Never));
    }

    #[test]
    fn access_providers_win_over_credential_providers_of_the_same_name() {
        let mut profile = profile(vec![provider("token", vec![])]);
        let status = profile.status.as_mut().expect("status");
        let mut old = provider("token", vec![]);
        old.cluster.server = Some("https://old.example".to_owned());
        status.credential_providers = vec![old.clone()];
        let access = ClusterProfileAccess::new().plugin(plugin());
        let server = |k: Kubeconfig| k.clusters[0].cluster.clone().and_then(|c| c.server);
        assert_eq!(
            server(access.kubeconfig_for(&profile).expect("new")).as_deref(),
            Some("https://east.example:6443")
        );
        let status = profile.status.as_mut().expect("status");
        status.access_providers.clear();
        assert_eq!(
            server(access.kubeconfig_for(&profile).expect("old")).as_deref(),
            Some("https://old.example")
        );
    }

    #[test]
    fn no_matching_provider_or_no_server_is_a_clear_error() {
        let access = ClusterProfileAccess::new().plugin(plugin());
        let error = access
            .kubeconfig_for(&profile(vec![provider("oidc", vec![])]))
            .expect_err("no match")
            .to_string();
        assert!(error.contains("fleet/east"), "{error}");
        assert!(
            error.contains(r#"it lists ["oidc"]; configured: ["token"]"#),
            "{error}"
        );
        let mut serverless = provider("token", vec![]);
        serverless.cluster.server = None;
        let error = access
            .kubeconfig_for(&profile(vec![serverless]))
            .expect_err("no server")
            .to_string();
        assert!(error.contains("names no server"), "{error}");
        let error = access
            .kubeconfig_for(&ClusterProfile::new("bare", Default::default()))
            .expect_err("no status")
            .to_string();
        assert!(error.contains("it lists []"), "{error}");
    }

    #[test]
    fn profile_arguments_and_environment_follow_the_policies() {
        let extensions = vec![
            AccessExtension {
                name: ADDITIONAL_ARGS_EXTENSION.to_owned(),
                extension: serde_json::json!(["--cluster", "east"]),
            },
            AccessExtension {
                name: ADDITIONAL_ENVS_EXTENSION.to_owned(),
                extension: serde_json::json!({"MODE": "profile", "REGION": "eu"}),
            },
        ];
        let profile = profile(vec![provider("token", extensions)]);
        let exec = |plugin: AccessPlugin| {
            let kubeconfig = ClusterProfileAccess::new()
                .plugin(plugin)
                .kubeconfig_for(&profile)
                .expect("a kubeconfig");
            exec_of(&kubeconfig).clone()
        };
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());

        let ignored = exec(plugin());
        assert_eq!(ignored.args, Some(vec!["--plain".to_owned()]));
        assert_eq!(envs(&ignored), [pair("MODE", "plugin")]);

        let appended = exec(
            plugin()
                .profile_args(ProfileArgsPolicy::Append)
                .profile_envs(ProfileEnvsPolicy::AppendIfNotExists),
        );
        assert_eq!(
            appended.args,
            Some(vec![
                "--plain".to_owned(),
                "--cluster".to_owned(),
                "east".to_owned()
            ])
        );
        assert_eq!(
            envs(&appended),
            [pair("MODE", "plugin"), pair("REGION", "eu")]
        );

        let replaced = exec(plugin().profile_envs(ProfileEnvsPolicy::Replace));
        assert_eq!(
            envs(&replaced),
            [pair("MODE", "profile"), pair("REGION", "eu")]
        );
    }

    #[test]
    fn one_profile_always_makes_the_same_identity() {
        let profile = profile(vec![provider(
            "token",
            vec![AccessExtension {
                name: ADDITIONAL_ENVS_EXTENSION.to_owned(),
                extension: serde_json::json!({"A": "1", "B": "2", "C": "3"}),
            }],
        )]);
        let access =
            ClusterProfileAccess::new().plugin(plugin().profile_envs(ProfileEnvsPolicy::Replace));
        let identity = || identity_of(&access.kubeconfig_for(&profile).expect("kubeconfig"));
        let first = identity().expect("identity");
        for _ in 0..20 {
            assert_eq!(identity().expect("identity"), first);
        }
    }

    #[test]
    fn a_bad_extension_or_provider_file_is_a_clear_error() {
        let profile = profile(vec![provider(
            "token",
            vec![AccessExtension {
                name: ADDITIONAL_ARGS_EXTENSION.to_owned(),
                extension: serde_json::json!({"not": "a list"}),
            }],
        )]);
        let error = ClusterProfileAccess::new()
            .plugin(plugin().profile_args(ProfileArgsPolicy::Append))
            .kubeconfig_for(&profile)
            .expect_err("a bad extension")
            .to_string();
        assert!(error.contains("is not a list of strings"), "{error}");

        let error = ClusterProfileAccess::from_json(
            r#"{"providers": [{"name": "x", "execConfig": {}, "profileSourcedCLIArgsPolicy": "Prepend"}]}"#,
        )
        .expect_err("an unknown policy")
        .to_string();
        assert!(error.contains("Prepend"), "{error}");
        let error = ClusterProfileAccess::from_file("/nonexistent/providers.json")
            .expect_err("no file")
            .to_string();
        assert!(error.contains("/nonexistent/providers.json"), "{error}");
    }

    #[test]
    fn the_go_provider_file_loads_with_empty_policies() {
        let access = ClusterProfileAccess::from_json(
            r#"{"providers": [{"name": "secretreader", "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1", "args": null,
                "command": "/plugin", "env": null, "provideClusterInfo": true},
                "profileSourcedCLIArgsPolicy": "", "profileSourcedEnvVarsPolicy": "Replace"}]}"#,
        )
        .expect("loads");
        let plugin = &access.plugins()[0];
        assert!(plugin.exec_config.provide_cluster_info);
        assert_eq!(plugin.profile_args, ProfileArgsPolicy::Ignore);
        assert_eq!(plugin.profile_envs, ProfileEnvsPolicy::Replace);
    }
}
