//! The cargo features of opkit (and opkit-envtest) a project turns on,
//! and the `Cargo.toml` lines that say so: `cargo opkit new` writes what
//! its `main` uses, `cargo opkit create webhook` adds the webhook's.

/// What `cargo opkit create webhook` turns on in opkit: the webhook server
/// and `dev-cert` (the managed serving certificate, `DevCertificate` in
/// the tests).
pub(crate) const WEBHOOK: &[&str] = &["webhook", "dev-cert"];
/// What it turns on in opkit-envtest: `ControlPlane::install_webhooks`.
pub(crate) const ENVTEST_WEBHOOK: &[&str] = &["webhook"];

/// The opkit cargo features a new project turns on: `secure-metrics` (its
/// `main` serves `/metrics` over HTTPS by default, `--metrics-secure`),
/// with `--multicluster`, `multicluster`, and with `--sharding`, `shard`.
/// opkit's own defaults (none) stay on; `cargo opkit create webhook` adds
/// `webhook` and `dev-cert`.
pub(crate) fn new_project(sharding: bool, multicluster: bool) -> Vec<&'static str> {
    let mut features = vec!["secure-metrics"];
    if multicluster {
        features.push("multicluster");
    }
    if sharding {
        features.push("shard");
    }
    features
}

/// `name = "version"` for a plain version, else `name = { <source>,
/// features = [...] }` (`source`: `version = "..."` or `path = "..."`,
/// quoted already; feature names need no escaping).
pub(crate) fn dependency_line(name: &str, source: &str, features: &[&str]) -> String {
    match source.strip_prefix("version = ") {
        Some(version) if features.is_empty() => format!("{name} = {version}"),
        _ if features.is_empty() => format!("{name} = {{ {source} }}"),
        _ => {
            let list: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
            format!("{name} = {{ {source}, features = [{}] }}", list.join(", "))
        }
    }
}

/// `Cargo.toml` with `features` on in the first line starting with
/// `prefix` (for `opkit = `, the `[dependencies]` line, which comes before
/// `[dev-dependencies]`): `"0.1"` becomes a table, a table gains the
/// features it lacks (after those it has). `None` when there is no such
/// line or its form is unknown.
pub(crate) fn with_features(text: &str, prefix: &str, features: &[&str]) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 64);
    let mut found = false;
    for existing in text.split_inclusive('\n') {
        let body = existing.trim_end_matches('\n');
        let newline = &existing[body.len()..];
        match body.strip_prefix(prefix) {
            Some(value) if !found => {
                found = true;
                let value = value.trim();
                let missing: Vec<String> = features
                    .iter()
                    .filter(|f| !value.contains(&format!("\"{f}\"")))
                    .map(|f| format!("\"{f}\""))
                    .collect();
                let changed = if missing.is_empty() {
                    value.to_owned()
                } else if value.starts_with('"') {
                    format!(
                        "{{ version = {value}, features = [{}] }}",
                        missing.join(", ")
                    )
                } else if let Some(inner) =
                    value.strip_prefix('{').and_then(|v| v.strip_suffix('}'))
                {
                    if let Some(at) = inner.find("features = [") {
                        let (head, tail) = inner.split_at(at + "features = [".len());
                        let close = tail.find(']')?;
                        let (listed, rest) = tail.split_at(close);
                        let listed = listed.trim();
                        let list = if listed.is_empty() {
                            missing.join(", ")
                        } else {
                            format!("{listed}, {}", missing.join(", "))
                        };
                        format!("{{{head}{list}{rest}}}")
                    } else {
                        format!(
                            "{{{}, features = [{}] }}",
                            inner.trim_end(),
                            missing.join(", ")
                        )
                    }
                } else {
                    return None;
                };
                out.push_str(&format!("{prefix}{changed}{newline}"));
            }
            _ => out.push_str(existing),
        }
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_on_features_in_every_form_of_a_dependency_line() {
        let features = &["webhook", "dev-cert"];
        let cases = [
            (
                "opkit = \"0.1\"\n",
                "opkit = { version = \"0.1\", features = [\"webhook\", \"dev-cert\"] }\n",
            ),
            (
                "opkit = { path = \"/x/sdk\" }\n",
                "opkit = { path = \"/x/sdk\", features = [\"webhook\", \"dev-cert\"] }\n",
            ),
            (
                "opkit = { version = \"0.1\", features = [\"secure-metrics\"] }\n",
                "opkit = { version = \"0.1\", features = [\"secure-metrics\", \"webhook\", \"dev-cert\"] }\n",
            ),
            (
                "opkit = { version = \"0.1\", features = [\"webhook\"] }\n",
                "opkit = { version = \"0.1\", features = [\"webhook\", \"dev-cert\"] }\n",
            ),
            (
                "opkit = { version = \"0.1\", features = [] }\n",
                "opkit = { version = \"0.1\", features = [\"webhook\", \"dev-cert\"] }\n",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(with_features(before, "opkit = ", features).unwrap(), after);
            // a second time changes nothing
            assert_eq!(with_features(after, "opkit = ", features).unwrap(), after);
        }
        // Only the first matching line changes: opkit's never touches
        // opkit-envtest's, and the reverse.
        let both = "opkit = \"0.1\"\n[dev-dependencies]\nopkit-envtest = \"0.1\"\n";
        let out = with_features(both, "opkit = ", features).unwrap();
        assert!(out.ends_with("[dev-dependencies]\nopkit-envtest = \"0.1\"\n"));
        let out = with_features(both, "opkit-envtest = ", &["webhook"]).unwrap();
        assert_eq!(
            out,
            "opkit = \"0.1\"\n[dev-dependencies]\nopkit-envtest = { version = \"0.1\", features = [\"webhook\"] }\n"
        );
        assert!(with_features("opkit-envtest = \"0.1\"\n", "opkit = ", features).is_none());
        assert!(with_features("serde = \"1\"\n", "opkit = ", features).is_none());
    }
}
