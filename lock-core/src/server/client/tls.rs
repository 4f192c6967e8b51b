//! The certificates of a [`TlsConfig`], read and checked once for either client.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::LockError;
use crate::server::topology::TlsConfig;

/// PEM files read from a [`TlsConfig`], each checked to hold what it should.
#[derive(Clone)]
pub(crate) struct TlsMaterial {
    /// The CA certificates to trust; `None` trusts the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate chain and key, for servers that verify clients.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsMaterial {
    /// Reads and checks the files of `tls`. Errors name the field at fault:
    /// a file that cannot be read, or holds no PEM certificate or key.
    pub fn load(tls: &TlsConfig) -> Result<Self, LockError> {
        let ca_pem = match &tls.ca_file {
            Some(path) => {
                let pem = read("tls.ca_file", path)?;
                certificates("tls.ca_file", path, &pem)?;
                Some(pem)
            }
            None => None,
        };
        let client = match (&tls.cert_file, &tls.key_file) {
            (Some(cert_path), Some(key_path)) => {
                let cert = read("tls.cert_file", cert_path)?;
                certificates("tls.cert_file", cert_path, &cert)?;
                let key = read("tls.key_file", key_path)?;
                PrivateKeyDer::from_pem_slice(&key).map_err(|err| {
                    LockError::config(
                        "tls.key_file",
                        format!("{} holds no PEM private key: {err}", key_path.display()),
                    )
                })?;
                Some((cert, key))
            }
            _ => None,
        };
        Ok(TlsMaterial { ca_pem, client })
    }

    /// A rustls client config (ring provider) that trusts the CA file or the
    /// system roots and presents the client certificate if there is one.
    #[cfg_attr(not(feature = "fred"), allow(dead_code))]
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, LockError> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca_pem {
            Some(pem) => {
                for certificate in CertificateDer::pem_slice_iter(pem).flatten() {
                    roots.add(certificate).map_err(|err| {
                        LockError::config("tls.ca_file", format!("unusable CA certificate: {err}"))
                    })?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(LockError::config(
                        "tls.ca_file",
                        "no CA file is given and no system root certificate could be loaded",
                    ));
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| LockError::config("tls", err.to_string()))?
            .with_root_certificates(roots);
        match &self.client {
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(cert).flatten().collect();
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|err| LockError::config("tls.key_file", err.to_string()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|err| LockError::config("tls.cert_file", err.to_string()))
            }
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// Makes ring the process's rustls provider unless one is installed already:
/// the `redis` crate builds its TLS config with the process default.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: some provider is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn read(field: &str, path: &Path) -> Result<Vec<u8>, LockError> {
    std::fs::read(path)
        .map_err(|err| LockError::config(field, format!("cannot read {}: {err}", path.display())))
}

fn certificates(field: &str, path: &Path, pem: &[u8]) -> Result<(), LockError> {
    let mut count = 0;
    for certificate in CertificateDer::pem_slice_iter(pem) {
        certificate.map_err(|err| {
            LockError::config(field, format!("{} is not valid PEM: {err}", path.display()))
        })?;
        count += 1;
    }
    if count == 0 {
        return Err(LockError::config(
            field,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(())
}
