//! The kubeconfig a control plane writes for kubectl and other tools.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

/// The context, cluster and user name used in generated kubeconfigs.
pub(crate) const CONTEXT: &str = "opkit-envtest";

/// What a kubeconfig user authenticates with.
pub(crate) enum Credentials<'a> {
    /// A client certificate and key (PEM).
    Certificate { cert_pem: &'a str, key_pem: &'a str },
    /// A bearer token.
    Token(&'a str),
}

/// A kubeconfig with one cluster, one user and one context, all named
/// [`CONTEXT`]; `impersonate` adds kubectl's `as` / `as-groups`.
pub(crate) fn build(
    server: &str,
    ca_pem: &str,
    credentials: Credentials<'_>,
    impersonate: Option<(&str, &[String])>,
) -> Kubeconfig {
    let mut user = AuthInfo::default();
    match credentials {
        Credentials::Certificate { cert_pem, key_pem } => {
            user.client_certificate_data = Some(STANDARD.encode(cert_pem));
            user.client_key_data = Some(STANDARD.encode(key_pem).into());
        }
        Credentials::Token(token) => user.token = Some(token.to_owned().into()),
    }
    if let Some((name, groups)) = impersonate {
        user.impersonate = Some(name.to_owned());
        if !groups.is_empty() {
            user.impersonate_groups = Some(groups.to_vec());
        }
    }
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: CONTEXT.to_owned(),
            cluster: Some(Cluster {
                server: Some(server.to_owned()),
                certificate_authority_data: Some(STANDARD.encode(ca_pem)),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: CONTEXT.to_owned(),
            auth_info: Some(user),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: CONTEXT.to_owned(),
            context: Some(Context {
                cluster: CONTEXT.to_owned(),
                user: Some(CONTEXT.to_owned()),
                namespace: Some("default".to_owned()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(CONTEXT.to_owned()),
        kind: Some("Config".to_owned()),
        api_version: Some("v1".to_owned()),
        ..Kubeconfig::default()
    }
}

/// Serializes a kubeconfig as JSON, which kubectl and client-go read as YAML.
pub(crate) fn to_json(kubeconfig: &Kubeconfig) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(kubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_kubes_loader() {
        let kc = build(
            "https://127.0.0.1:6443",
            "CA",
            Credentials::Certificate {
                cert_pem: "CERT",
                key_pem: "KEY",
            },
            Some(("alice", &["devs".to_owned()])),
        );
        let text = to_json(&kc).unwrap();
        let back = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(back.current_context.as_deref(), Some(CONTEXT));
        let user = back.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.impersonate.as_deref(), Some("alice"));
        assert_eq!(
            user.impersonate_groups.as_deref(),
            Some(&["devs".to_owned()][..])
        );
        assert_eq!(
            user.client_certificate_data.as_deref(),
            Some(STANDARD.encode("CERT").as_str())
        );
        let cluster = back.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
    }
}
