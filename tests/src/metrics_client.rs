//! A keep-alive HTTP/1.1 client for `/metrics`, plain or over TLS (verified
//! against a CA, or not verified at all as scrapers of a self-signed
//! certificate do), sending a bearer token when given one. The tests use
//! it from the host; `metrics_scrape` (`src/bin`) from a pod.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// Plain HTTP: no TLS.
    PlainHttp,
    /// TLS, trusting any certificate (`insecure_skip_verify`).
    AnyCertificate,
    /// TLS, trusting this CA (PEM) for the host name connected to
    /// (`127.0.0.1` for [`MetricsClient::connect`]).
    Ca(&'a str),
}

/// One connection to a metrics server.
pub struct MetricsClient {
    /// The `Host` header sent.
    host: String,
    sender: SendRequest<Empty<Bytes>>,
    connection: JoinHandle<()>,
    /// The certificate the server presented (DER), over TLS.
    pub peer_certificate: Option<Vec<u8>>,
}

impl Drop for MetricsClient {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

impl MetricsClient {
    /// Connects to `addr` (named `127.0.0.1`), checking its certificate as
    /// `trust` says.
    pub async fn connect(addr: SocketAddr, trust: Trust<'_>) -> Result<Self, String> {
        Self::connect_named(addr, "127.0.0.1", trust).await
    }

    /// Connects to `addr` as the server `host` (an IP address or a DNS
    /// name: the TLS server name and the `Host` header), checking its
    /// certificate as `trust` says.
    pub async fn connect_named(
        addr: SocketAddr,
        host: &str,
        trust: Trust<'_>,
    ) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let config = match trust {
            Trust::PlainHttp => return Self::handshake(TokioIo::new(tcp), host, None).await,
            Trust::AnyCertificate => client_config()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate))
                .with_no_client_auth(),
            Trust::Ca(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                let ca = CertificateDer::from_pem_slice(pem.as_bytes())
                    .map_err(|e| format!("the CA: {e}"))?;
                roots.add(ca).map_err(|e| format!("the CA: {e}"))?;
                client_config()
                    .with_root_certificates(roots)
                    .with_no_client_auth()
            }
        };
        let mut config = config;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: {e}"))?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec());
        Self::handshake(TokioIo::new(tls), host, peer).await
    }

    async fn handshake<T>(
        io: TokioIo<T>,
        host: &str,
        peer_certificate: Option<Vec<u8>>,
    ) -> Result<Self, String>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            host: host.to_owned(),
            sender,
            connection,
            peer_certificate,
        })
    }

    /// `GET path` with `token` as the bearer token; the status and body.
    pub async fn get(&mut self, path: &str, token: Option<&str>) -> Result<(u16, String), String> {
        let mut request = http::Request::get(path).header(http::header::HOST, &self.host);
        if let Some(token) = token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Empty::new()).map_err(|e| e.to_string())?;
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("GET {path} body: {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

fn client_config() -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier> {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
}

/// Accepts every certificate (signatures are still checked).
#[derive(Debug)]
struct AnyCertificate;

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
