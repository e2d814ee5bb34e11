//! An open watch: the response body read chunk by chunk, each chunk handed
//! to the [`EventDecoder`] of the body's encoding.

use bytes::Bytes;
use http_body_util::BodyExt;
use kube::client::Body;
use serde::de::DeserializeOwned;

use crate::cache::{
    decode::{EventDecoder, WatchLine},
    error::ReflectorError,
};

/// An open watch: decoded events, one at a time.
pub(crate) struct WatchStream<K> {
    body: BodyChunks,
    decoder: EventDecoder<K>,
}

impl<K: DeserializeOwned> WatchStream<K> {
    pub(crate) fn new(body: Body, decoder: EventDecoder<K>) -> Self {
        Self {
            body: BodyChunks::new(body),
            decoder,
        }
    }

    /// The next event; `None` when the server ended the watch (or the
    /// connection dropped mid-stream, which client-go also treats as an end).
    pub(crate) async fn next(&mut self) -> Option<Result<WatchLine<K>, ReflectorError>> {
        let what = "watch event";
        loop {
            if let Some(event) = self.decoder.next_event() {
                if self.decoder.is_broken() {
                    self.body.stop();
                }
                return Some(event.map_err(|e| e.into_reflector(what)));
            }
            match self.body.next().await {
                Ok(Some(data)) => self.decoder.push(data),
                Ok(None) => {
                    return self
                        .decoder
                        .finish()
                        .map(|event| event.map_err(|e| e.into_reflector(what)));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "watch stream read error; treating as end of watch");
                    self.decoder.reset();
                    return None;
                }
            }
        }
    }
}

/// A response body, chunk by chunk, ending for good at its end or at the
/// first read error.
struct BodyChunks {
    body: Body,
    done: bool,
}

impl BodyChunks {
    fn new(body: Body) -> Self {
        Self { body, done: false }
    }

    /// The next chunk of data; `None` once the body has ended (or was
    /// stopped), then forever.
    async fn next(&mut self) -> Result<Option<Bytes>, kube::Error> {
        while !self.done {
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Reads no more.
    fn stop(&mut self) {
        self.done = true;
    }
}
