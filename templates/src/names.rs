//! Validating the names a user gives, and deriving the other spellings
//! the templates need.

use crate::error::ScaffoldError;

/// Rust keywords (strict, reserved and weak ones that cannot name a module).
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Crate names the generated project depends on or that Rust reserves.
const TAKEN_CRATES: &[&str] = &[
    "opkit",
    "kube",
    "k8s-openapi",
    "schemars",
    "serde",
    "serde_json",
    "serde-json",
    "tokio",
    "tracing",
    "tracing-subscriber",
    "clap",
    "test",
    "core",
    "std",
    "alloc",
    "proc-macro",
    "proc_macro",
];

/// Type names the generated code imports next to the kind's own types.
const TAKEN_KINDS: &[&str] = &[
    "Action",
    "Api",
    "Arc",
    "Condition",
    "ConditionStatus",
    "Context",
    "Controller",
    "ControlPlane",
    "CustomResource",
    "DeleteParams",
    "Deserialize",
    "Error",
    "EventError",
    "EventRecorder",
    "JsonSchema",
    "Manager",
    "Namespace",
    "ObjectMeta",
    "PostParams",
    "Reconcile",
    "Request",
    "Resource",
    "ResourceExt",
    "Self",
    "Serialize",
    "String",
    "Vec",
    "Option",
    "Result",
    "Box",
];

/// A project name: a Cargo package name that is also a DNS-1123 label
/// (it names the namespace, ServiceAccount, ClusterRole and Deployment).
pub fn validate_name(name: &str) -> Result<(), ScaffoldError> {
    let bad = |reason: &str| ScaffoldError::InvalidName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > 40 {
        return Err(bad(
            "it is longer than 40 characters (Kubernetes names are built from it)",
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(bad("it must start with a lower-case letter"));
    }
    if name.ends_with('-') {
        return Err(bad("it must not end with '-'"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(bad(&format!(
            "{c:?} is not allowed: use lower-case letters, digits and '-' (it names Kubernetes objects)"
        )));
    }
    if name.contains("--") {
        return Err(bad("it must not contain \"--\""));
    }
    if TAKEN_CRATES.contains(&name) || KEYWORDS.contains(&name) {
        return Err(bad(
            "it is the name of a crate the project uses, or a Rust keyword",
        ));
    }
    Ok(())
}

/// An API group: a DNS subdomain with at least two labels (`cache.example.com`).
pub fn validate_group(group: &str) -> Result<(), ScaffoldError> {
    let bad = |reason: &str| ScaffoldError::InvalidGroup {
        group: group.to_owned(),
        reason: reason.to_owned(),
    };
    if group.len() > 253 {
        return Err(bad("it is longer than 253 characters"));
    }
    let labels: Vec<&str> = group.split('.').collect();
    if labels.len() < 2 {
        return Err(bad("it needs a domain, e.g. cache.example.com"));
    }
    for label in labels {
        let valid = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(bad(&format!(
                "{label:?} is not a DNS label: 1 to 63 lower-case letters, digits or '-', \
                 starting and ending with a letter or digit"
            )));
        }
    }
    if group.ends_with(".k8s.io") || group.ends_with(".kubernetes.io") {
        return Err(bad(
            "*.k8s.io and *.kubernetes.io groups are reserved for Kubernetes itself",
        ));
    }
    Ok(())
}

/// An API version: `v1`, `v1alpha1`, `v2beta3`.
pub fn validate_version(version: &str) -> Result<(), ScaffoldError> {
    let bad = || ScaffoldError::InvalidVersion {
        version: version.to_owned(),
    };
    let rest = version.strip_prefix('v').ok_or_else(bad)?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let (major, suffix) = rest.split_at(digits);
    if major.is_empty() || major.starts_with('0') {
        return Err(bad());
    }
    if suffix.is_empty() {
        return Ok(());
    }
    let number = suffix
        .strip_prefix("alpha")
        .or_else(|| suffix.strip_prefix("beta"))
        .ok_or_else(bad)?;
    if number.is_empty() || number.starts_with('0') || !number.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    Ok(())
}

/// A kind: UpperCamelCase, letters and digits, that does not clash with a
/// Rust keyword or a name the generated code imports.
pub fn validate_kind(kind: &str) -> Result<(), ScaffoldError> {
    let bad = |reason: &str| ScaffoldError::InvalidKind {
        kind: kind.to_owned(),
        reason: reason.to_owned(),
    };
    if kind.is_empty() {
        return Err(bad("it is empty"));
    }
    if kind.len() > 63 {
        return Err(bad("it is longer than 63 characters"));
    }
    if !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(bad(
            "it must start with an upper-case letter (UpperCamelCase, e.g. Memcached)",
        ));
    }
    if let Some(c) = kind.chars().find(|c| !c.is_ascii_alphanumeric()) {
        return Err(bad(&format!(
            "{c:?} is not allowed: use letters and digits (UpperCamelCase)"
        )));
    }
    if TAKEN_KINDS.contains(&kind) {
        return Err(bad(
            "the generated code already uses that name; choose another",
        ));
    }
    let snake = snake_case(kind);
    if KEYWORDS.contains(&snake.as_str()) {
        return Err(bad(&format!(
            "its module name {snake:?} is a Rust keyword; choose another"
        )));
    }
    Ok(())
}

/// `GuestBook` → `guest_book`, `HTTPRoute` → `http_route`.
pub fn snake_case(kind: &str) -> String {
    let chars: Vec<char> = kind.chars().collect();
    let mut out = String::with_capacity(kind.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        validate_name("memcached-operator").unwrap();
        for bad in [
            "",
            "Memcached",
            "1op",
            "op-",
            "op_x",
            "a--b",
            "opkit",
            "op erator",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        let err = validate_name("My_Operator").unwrap_err().to_string();
        assert!(err.contains("lower-case"), "{err}");
    }

    #[test]
    fn groups() {
        validate_group("cache.example.com").unwrap();
        for bad in [
            "cache",
            "Cache.example.com",
            "cache..com",
            "-a.com",
            "apps.k8s.io",
        ] {
            assert!(validate_group(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions() {
        for good in ["v1", "v1alpha1", "v2beta3", "v10"] {
            validate_version(good).unwrap();
        }
        for bad in ["1", "v", "v0", "v1alpha", "v1gamma1", "v1alpha01", "V1"] {
            assert!(validate_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds() {
        validate_kind("Memcached").unwrap();
        validate_kind("HTTPRoute").unwrap();
        for bad in ["memcached", "Mem-cached", "", "Request", "Type", "Match"] {
            assert!(validate_kind(bad).is_err(), "{bad}");
        }
        assert_eq!(snake_case("GuestBook"), "guest_book");
        assert_eq!(snake_case("HTTPRoute"), "http_route");
        assert_eq!(snake_case("Memcached"), "memcached");
        assert_eq!(snake_case("Route53Zone"), "route53_zone");
    }
}
