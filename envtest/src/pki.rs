//! Keys and certificates for a local control plane, generated in memory.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::error::{EnvtestError, Result};

/// PEM-encoded key material for one control plane, and the CA that signs
/// more certificates for a cluster's components.
pub(crate) struct Pki {
    /// The CA's parameters and key, for [`Pki::client_certificate`] and
    /// [`Pki::serving_certificate`].
    issuer: Issuer<'static, KeyPair>,
    /// The CA that signs the serving and client certificates (PEM).
    pub ca_pem: String,
    /// kube-apiserver's serving certificate for `127.0.0.1` and `localhost`.
    pub serving_cert_pem: String,
    /// Its private key.
    pub serving_key_pem: String,
    /// The admin client certificate (`CN=opkit-admin`, `O=system:masters`).
    pub admin_cert_pem: String,
    /// Its private key.
    pub admin_key_pem: String,
    /// Private key that signs service-account tokens.
    pub service_account_key_pem: String,
    /// Its public key, for verifying them.
    pub service_account_pub_pem: String,
}

/// The admin identity's user name.
pub(crate) const ADMIN_USER: &str = "opkit-admin";

fn cert_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> EnvtestError {
    move |source| EnvtestError::Certificate { what, source }
}

impl Pki {
    /// Generates a fresh CA, serving certificate, admin client certificate and
    /// service-account signing key (all ECDSA P-256). The serving certificate
    /// names `127.0.0.1`, `localhost`, `kubernetes.default.svc` and
    /// `extra_sans` (IP addresses or DNS names).
    pub fn generate(extra_sans: &[String]) -> Result<Self> {
        let ca_key = KeyPair::generate().map_err(cert_err("the CA key"))?;
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(cert_err("the CA"))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "opkit-envtest-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_err("the CA"))?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate().map_err(cert_err("the serving key"))?;
        let mut sans = vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
            "kubernetes.default.svc.cluster.local".to_owned(),
        ];
        sans.extend(extra_sans.iter().cloned());
        let mut serving =
            CertificateParams::new(sans).map_err(cert_err("the serving certificate"))?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(cert_err("the serving certificate"))?;

        let admin_key = KeyPair::generate().map_err(cert_err("the admin key"))?;
        let mut admin = CertificateParams::new(Vec::<String>::new())
            .map_err(cert_err("the admin certificate"))?;
        admin
            .distinguished_name
            .push(DnType::CommonName, ADMIN_USER);
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin
            .signed_by(&admin_key, &issuer)
            .map_err(cert_err("the admin certificate"))?;

        let sa_key = KeyPair::generate().map_err(cert_err("the service-account signing key"))?;

        Ok(Self {
            issuer,
            ca_pem: ca_cert.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            admin_cert_pem: admin_cert.pem(),
            admin_key_pem: admin_key.serialize_pem(),
            service_account_key_pem: sa_key.serialize_pem(),
            service_account_pub_pem: sa_key.public_key_pem(),
        })
    }
}

impl Pki {
    /// A client certificate for `common_name` in `organizations` (RBAC's
    /// user and groups), signed by the CA: `(certificate PEM, key PEM)`.
    pub fn client_certificate(
        &self,
        common_name: &str,
        organizations: &[&str],
    ) -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(cert_err("a client key"))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(cert_err("a client certificate"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for org in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(cert_err("a client certificate"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A serving certificate for `sans` (IP addresses or DNS names), signed
    /// by the CA: `(certificate PEM, key PEM)`.
    pub fn serving_certificate(
        &self,
        common_name: &str,
        sans: &[String],
    ) -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(cert_err("a serving key"))?;
        let mut params =
            CertificateParams::new(sans.to_vec()).map_err(cert_err("a serving certificate"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(cert_err("a serving certificate"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_distinct_pem_material() {
        let pki = Pki::generate(&["10.0.0.1".to_owned()]).unwrap();
        for pem in [&pki.ca_pem, &pki.serving_cert_pem, &pki.admin_cert_pem] {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        for pem in [
            &pki.serving_key_pem,
            &pki.admin_key_pem,
            &pki.service_account_key_pem,
        ] {
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
        }
        assert!(
            pki.service_account_pub_pem
                .starts_with("-----BEGIN PUBLIC KEY-----")
        );
        assert_ne!(pki.serving_key_pem, pki.admin_key_pem);
        let (cert, key) = pki.client_certificate("system:kube-proxy", &[]).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let (cert, _) = pki
            .serving_certificate("kubelet", &["198.18.1.2".to_owned()])
            .unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
