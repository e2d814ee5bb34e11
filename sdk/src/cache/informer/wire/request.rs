//! LIST and WATCH requests, built with [`kube::core::Request`] from
//! [`ListParams`] and [`WatchParams`]. What `kube_core` cannot express is
//! set on the built `http::Request`, each with its reason:
//!
//! - the `Accept` header: `kube_core`'s `list`/`watch` send none, and its
//!   metadata variants ask for `PartialObjectMetadata` without a JSON
//!   fallback; opkit asks for protobuf (with JSON as the fallback) for the
//!   kinds it decodes from protobuf, and for metadata with full JSON as the
//!   fallback;
//! - a watch's `timeoutSeconds`: `WatchParams` refuses 295 s or more, while
//!   the reflector, like client-go, randomizes it in [5, 10] min to spread
//!   re-watches;
//! - a watch without a resourceVersion: `Request::watch` always writes the
//!   parameter; an empty one is left out, as client-go does (the server
//!   reads both the same: a streaming list then serves a consistent read);
//! - `shardSelector` (KEP-5866, Kubernetes 1.36 alpha): not in `kube_core`.

use kube::{
    client::Body,
    core::{
        Request,
        params::{ListParams, VersionMatch, WatchParams},
        request::Error as RequestError,
    },
};

use crate::cache::{decode::protobuf, error::ReflectorError};

const JSON: &str = "application/json";
const META_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const META_ONE: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// What a request asks the server to answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// JSON only.
    Json,
    /// Protobuf, else JSON.
    Protobuf,
    /// `PartialObjectMetadata` as JSON, else the whole objects as JSON.
    Metadata,
}

impl Answer {
    fn accept(self, list: bool) -> &'static str {
        match self {
            Self::Json => JSON,
            Self::Protobuf => protobuf::ACCEPT,
            Self::Metadata if list => META_LIST,
            Self::Metadata => META_ONE,
        }
    }
}

/// What is listed and watched: the collection's path, its selectors, and
/// the representation asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub url_path: &'a str,
    pub label_selector: Option<&'a str>,
    pub field_selector: Option<&'a str>,
    /// A KEP-5866 shard selector (`shardRange(...) || ...`).
    pub shard_selector: Option<&'a str>,
    pub answer: Answer,
}

/// Options of one LIST request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<VersionMatch>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
}

/// Options of one WATCH request.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchOptions {
    pub resource_version: Option<String>,
    pub timeout_secs: u32,
    pub send_initial_events: bool,
}

/// A LIST request (a continue token, when set, wins over the
/// resourceVersion, as the API requires). `kube_core` leaves out a
/// resourceVersion of `"0"` when a limit is set; the reflector's paginated
/// lists set no resourceVersion, so this does not arise.
pub(crate) fn list(
    target: Target<'_>,
    opts: &ListOptions,
) -> Result<http::Request<Body>, ReflectorError> {
    let params = ListParams {
        label_selector: target.label_selector.map(str::to_owned),
        field_selector: target.field_selector.map(str::to_owned),
        timeout: None,
        limit: opts.limit,
        continue_token: opts.continue_token.clone(),
        version_match: opts.resource_version_match.clone(),
        resource_version: opts.resource_version.clone(),
    };
    let mut req = Request::new(target.url_path)
        .list(&params)
        .map_err(ReflectorError::Request)?;
    if let Some(selector) = target.shard_selector {
        rewrite_query(&mut req, |_, _| true, &[("shardSelector", selector)])?;
    }
    Ok(with_accept(req, target.answer.accept(true)))
}

/// A WATCH request, with bookmarks; a streaming list (initial events, then
/// the watch) when `opts.send_initial_events`.
pub(crate) fn watch(
    target: Target<'_>,
    opts: &WatchOptions,
) -> Result<http::Request<Body>, ReflectorError> {
    let params = WatchParams {
        label_selector: target.label_selector.map(str::to_owned),
        field_selector: target.field_selector.map(str::to_owned),
        // set below: WatchParams caps it under 295 s
        timeout: None,
        bookmarks: true,
        send_initial_events: opts.send_initial_events,
    };
    let mut req = Request::new(target.url_path)
        .watch(
            &params,
            opts.resource_version.as_deref().unwrap_or_default(),
        )
        .map_err(ReflectorError::Request)?;
    let timeout = opts.timeout_secs.to_string();
    let mut extra = vec![("timeoutSeconds", timeout.as_str())];
    if let Some(selector) = target.shard_selector {
        extra.push(("shardSelector", selector));
    }
    // `timeoutSeconds` is replaced; an empty `resourceVersion` dropped.
    rewrite_query(
        &mut req,
        |k, v| k != "timeoutSeconds" && !(k == "resourceVersion" && v.is_empty()),
        &extra,
    )?;
    Ok(with_accept(req, target.answer.accept(false)))
}

/// Keeps the query pairs `keep` accepts and appends `extra`.
fn rewrite_query(
    req: &mut http::Request<Vec<u8>>,
    keep: impl Fn(&str, &str) -> bool,
    extra: &[(&str, &str)],
) -> Result<(), ReflectorError> {
    let uri = req.uri();
    let mut query = form_urlencoded::Serializer::new(format!("{}?", uri.path()));
    for (k, v) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        if keep(&k, &v) {
            query.append_pair(&k, &v);
        }
    }
    for (k, v) in extra {
        query.append_pair(k, v);
    }
    *req.uri_mut() = query.finish().parse().map_err(|e: http::uri::InvalidUri| {
        ReflectorError::Request(RequestError::BuildRequest(e.into()))
    })?;
    Ok(())
}

fn with_accept(req: http::Request<Vec<u8>>, accept: &'static str) -> http::Request<Body> {
    let mut req = req.map(Body::from);
    req.headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(answer: Answer) -> Target<'static> {
        Target {
            url_path: "/api/v1/namespaces/prod/configmaps",
            label_selector: Some("app=shop,tier!=db"),
            field_selector: Some("metadata.name=x"),
            shard_selector: None,
            answer,
        }
    }

    fn query(req: &http::Request<Body>) -> Vec<(String, String)> {
        let mut pairs: Vec<_> =
            form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        pairs.sort();
        pairs
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut p: Vec<_> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p.sort();
        p
    }

    fn accept(req: &http::Request<Body>) -> &str {
        req.headers()[http::header::ACCEPT].to_str().unwrap()
    }

    #[test]
    fn list_pages_carry_selectors_limit_and_continue() {
        let first = list(
            target(Answer::Protobuf),
            &ListOptions {
                limit: Some(500),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(first.uri().path(), "/api/v1/namespaces/prod/configmaps");
        assert_eq!(
            query(&first),
            pairs(&[
                ("labelSelector", "app=shop,tier!=db"),
                ("fieldSelector", "metadata.name=x"),
                ("limit", "500"),
            ])
        );
        assert_eq!(accept(&first), protobuf::ACCEPT);
        let next = list(
            target(Answer::Json),
            &ListOptions {
                limit: Some(500),
                continue_token: Some("c1".into()),
                resource_version: Some("7".into()),
                resource_version_match: Some(VersionMatch::NotOlderThan),
            },
        )
        .unwrap();
        assert_eq!(
            query(&next),
            pairs(&[
                ("labelSelector", "app=shop,tier!=db"),
                ("fieldSelector", "metadata.name=x"),
                ("limit", "500"),
                ("continue", "c1"),
            ])
        );
        assert_eq!(accept(&next), "application/json");
        let at = list(
            target(Answer::Metadata),
            &ListOptions {
                resource_version: Some("7".into()),
                resource_version_match: Some(VersionMatch::Exact),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(query(&at).contains(&("resourceVersionMatch".into(), "Exact".into())));
        assert_eq!(accept(&at), META_LIST);
    }

    #[test]
    fn watches_keep_client_go_timeouts_and_streaming_list_params() {
        let w = watch(
            target(Answer::Json),
            &WatchOptions {
                resource_version: Some("12".into()),
                timeout_secs: 437,
                send_initial_events: false,
            },
        )
        .unwrap();
        assert_eq!(
            query(&w),
            pairs(&[
                ("watch", "true"),
                ("resourceVersion", "12"),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", "437"),
                ("labelSelector", "app=shop,tier!=db"),
                ("fieldSelector", "metadata.name=x"),
            ])
        );
        let stream = watch(
            target(Answer::Metadata),
            &WatchOptions {
                resource_version: None,
                timeout_secs: 600,
                send_initial_events: true,
            },
        )
        .unwrap();
        assert_eq!(
            query(&stream),
            pairs(&[
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", "600"),
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("labelSelector", "app=shop,tier!=db"),
                ("fieldSelector", "metadata.name=x"),
            ])
        );
        assert_eq!(accept(&stream), META_ONE);
    }

    #[test]
    fn a_shard_selector_is_sent_on_lists_and_watches() {
        let selector =
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')";
        let sharded = Target {
            shard_selector: Some(selector),
            ..target(Answer::Json)
        };
        let l = list(sharded, &ListOptions::default()).unwrap();
        assert!(query(&l).contains(&("shardSelector".into(), selector.into())));
        let w = watch(sharded, &WatchOptions::default()).unwrap();
        assert!(query(&w).contains(&("shardSelector".into(), selector.into())));
    }
}
