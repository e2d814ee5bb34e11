//! Who may read the secure `/metrics`: the request's bearer token is
//! authenticated with a TokenReview and the user it names is authorized
//! with a SubjectAccessReview for `get` on the non-resource URL `/metrics`
//! (controller-runtime's `filters.WithAuthenticationAndAuthorization`).
//! Decisions are cached by the token's SHA-256 for a short while, so a
//! scraper costs the API server two reviews per TTL, not two per scrape.

use std::collections::HashMap;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use ring::digest::{SHA256, SHA256_OUTPUT_LEN, digest};
use tokio::time::Instant;

/// How long an allowed token is trusted without asking the API server again.
pub(crate) const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token (unauthenticated, or not allowed) stays refused.
pub(crate) const DENIED_TTL: Duration = Duration::from_secs(10);
/// The most tokens remembered; past it, expired entries are dropped, and if
/// none has expired, all of them.
const MAX_ENTRIES: usize = 4096;
/// The path and verb a scraper must be allowed.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// What the reviews said about one token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The user may `get /metrics`.
    Allowed,
    /// The token is not valid (401).
    Unauthenticated(String),
    /// The user may not `get /metrics` (403).
    Forbidden { user: String, reason: String },
}

/// A refusal: the status and the body the scraper gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) body: String,
}

impl Refusal {
    fn new(status: StatusCode, body: String) -> Self {
        Self { status, body }
    }
}

impl Decision {
    fn refusal(&self) -> Option<Refusal> {
        match self {
            Self::Allowed => None,
            Self::Unauthenticated(why) => Some(Refusal::new(
                StatusCode::UNAUTHORIZED,
                format!("Unauthorized: {why}\n"),
            )),
            Self::Forbidden { user, reason } => Some(Refusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden: user {user:?} may not get {METRICS_PATH}{reason}; bind it a \
                     ClusterRole allowing nonResourceURLs [{METRICS_PATH}] verbs [get] (the \
                     generated <name>-metrics-reader)\n"
                ),
            )),
        }
    }

    fn ttl(&self) -> Duration {
        match self {
            Self::Allowed => ALLOWED_TTL,
            _ => DENIED_TTL,
        }
    }
}

/// Decisions by token hash, each until it expires (on tokio's clock).
#[derive(Default)]
pub(crate) struct DecisionCache {
    entries: Mutex<HashMap<[u8; 32], (Instant, Decision)>>,
}

impl std::fmt::Debug for DecisionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionCache")
            .field("entries", &self.entries.lock().len())
            .finish()
    }
}

impl DecisionCache {
    pub(crate) fn get(&self, key: &[u8; 32]) -> Option<Decision> {
        let entries = self.entries.lock();
        let (expires, decision) = entries.get(key)?;
        (Instant::now() < *expires).then(|| decision.clone())
    }

    pub(crate) fn insert(&self, key: [u8; 32], decision: Decision) {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (expires, _)| now < *expires);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let expires = now + decision.ttl();
        entries.insert(key, (expires, decision));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

/// Authenticates and authorizes scrapers against the API server.
pub(crate) struct MetricsAuth {
    client: kube::Client,
    cache: DecisionCache,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl MetricsAuth {
    pub(crate) fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: DecisionCache::default(),
        }
    }

    /// `Ok` when the request may read `/metrics`; otherwise what to answer.
    pub(crate) async fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(token) = bearer_token(headers) else {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send a bearer token (Authorization: Bearer <token>) of a user \
                 allowed to get /metrics\n"
                    .to_owned(),
            ));
        };
        let mut key = [0u8; SHA256_OUTPUT_LEN];
        key.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
        let decision = match self.cache.get(&key) {
            Some(decision) => decision,
            None => {
                let decision = self.review(token).await?;
                self.cache.insert(key, decision.clone());
                decision
            }
        };
        match decision.refusal() {
            None => Ok(()),
            Some(refusal) => Err(refusal),
        }
    }

    /// A TokenReview, then (if the token is valid) a SubjectAccessReview.
    /// An API server that cannot be asked is a 500 and nothing is cached.
    async fn review(&self, token: &str) -> Result<Decision, Refusal> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| unavailable("TokenReview", "authentication.k8s.io", &error))?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "the API server did not authenticate it".to_owned());
            tracing::debug!(reason = %why, "metrics scrape with an invalid token");
            return Ok(Decision::Unauthenticated(format!(
                "the bearer token is not valid: {why}"
            )));
        }
        let username = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|error| unavailable("SubjectAccessReview", "authorization.k8s.io", &error))?;
        let status = reviewed.status.unwrap_or_default();
        if status.allowed {
            return Ok(Decision::Allowed);
        }
        let reason = status
            .reason
            .filter(|r| !r.is_empty())
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        tracing::debug!(user = %username, "metrics scrape refused: not allowed to get /metrics");
        Ok(Decision::Forbidden {
            user: username,
            reason,
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header, if any.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unavailable(kind: &str, group: &str, error: &kube::Error) -> Refusal {
    tracing::error!(%error, kind, "cannot review a metrics scrape's token");
    Refusal::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!(
            "cannot authorize the scrape: creating a {kind} failed: {error}; the manager's \
             ServiceAccount needs create on {group} {}s (Rules::metrics_auth)\n",
            kind.to_ascii_lowercase()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_parsed() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, "bearer  abc ".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }

    #[tokio::test(start_paused = true)]
    async fn decisions_expire_after_their_ttl() {
        let cache = DecisionCache::default();
        cache.insert([1; 32], Decision::Allowed);
        cache.insert([2; 32], Decision::Unauthenticated("no".to_owned()));
        assert_eq!(cache.get(&[1; 32]), Some(Decision::Allowed));
        assert!(cache.get(&[2; 32]).is_some());
        tokio::time::advance(DENIED_TTL).await;
        assert_eq!(cache.get(&[1; 32]), Some(Decision::Allowed));
        assert_eq!(cache.get(&[2; 32]), None, "a refusal expires first");
        tokio::time::advance(ALLOWED_TTL - DENIED_TTL).await;
        assert_eq!(cache.get(&[1; 32]), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_entries_first() {
        let cache = DecisionCache::default();
        for i in 0..MAX_ENTRIES {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&i.to_le_bytes());
            let decision = if i == 0 {
                Decision::Allowed
            } else {
                Decision::Unauthenticated(String::new())
            };
            cache.insert(key, decision);
        }
        tokio::time::advance(DENIED_TTL).await;
        cache.insert([9; 32], Decision::Allowed);
        assert_eq!(cache.len(), 2, "the expired refusals were dropped");
        assert_eq!(cache.get(&[0; 32]), Some(Decision::Allowed));
    }

    #[test]
    fn refusals_say_what_to_do() {
        let forbidden = Decision::Forbidden {
            user: "system:serviceaccount:ns:sa".to_owned(),
            reason: String::new(),
        }
        .refusal()
        .unwrap();
        assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
        assert!(forbidden.body.contains("system:serviceaccount:ns:sa"));
        assert!(forbidden.body.contains("nonResourceURLs"));
        assert_eq!(Decision::Allowed.refusal(), None);
    }
}
