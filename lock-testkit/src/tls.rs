//! Certificates made at test time for TLS servers and clients.

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::server::context;

/// A fresh certificate authority, a server certificate and a client
/// certificate it signed, as PEM files in a temporary directory removed on
/// drop.
///
/// The server certificate names `127.0.0.1` (an IP address SAN, which rustls
/// and OpenSSL both check) and `localhost`, and may be used by a server and
/// as a client certificate (Redis presents it to its master and cluster
/// peers). The client certificate ([`cert_file`](Self::cert_file) and
/// [`key_file`](Self::key_file)) is for clients under test when the server
/// requires one.
///
/// Each [`generate`](Self::generate) makes a new, unrelated CA: a second
/// `TlsFiles` is the "wrong CA" (and its client certificate a wrong client
/// certificate) for servers started with the first.
#[derive(Debug)]
pub struct TlsFiles {
    dir: TempDir,
    ca_file: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
    server_cert_file: PathBuf,
    server_key_file: PathBuf,
}

impl TlsFiles {
    /// Makes a CA and the certificates it signs, and writes them out.
    pub fn generate() -> io::Result<TlsFiles> {
        let dir = crate::support::temp_dir("certificates")?;
        let path = |name: &str| dir.path().join(name);
        let files = TlsFiles {
            ca_file: path("ca.crt"),
            cert_file: path("client.crt"),
            key_file: path("client.key"),
            server_cert_file: path("server.crt"),
            server_key_file: path("server.key"),
            dir,
        };

        let mut ca = CertificateParams::default();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name = rcgen::DistinguishedName::new();
        // A name of its own, so a client that trusts another testkit CA
        // fails as it would in the field: an unknown issuer, not a bad
        // signature from a namesake.
        let unique = files.dir.path().file_name().map_or_else(
            || std::process::id().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        ca.distinguished_name
            .push(DnType::CommonName, format!("lock-testkit test CA {unique}"));
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().map_err(certificate_error)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(certificate_error)?;

        let leaf = |name: &str, sans: Vec<String>, usages: Vec<ExtendedKeyUsagePurpose>| {
            let mut params = CertificateParams::new(sans).map_err(certificate_error)?;
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = usages;
            params.use_authority_key_identifier_extension = true;
            let key = KeyPair::generate().map_err(certificate_error)?;
            let cert = params
                .signed_by(&key, &ca_cert, &ca_key)
                .map_err(certificate_error)?;
            Ok::<_, io::Error>((cert.pem(), key.serialize_pem()))
        };
        let (server_cert, server_key) = leaf(
            "127.0.0.1",
            vec!["127.0.0.1".to_owned(), "localhost".to_owned()],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
        let (client_cert, client_key) = leaf(
            "lock-testkit client",
            Vec::new(),
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        )?;

        for (file, pem) in [
            (&files.ca_file, ca_cert.pem()),
            (&files.server_cert_file, server_cert),
            (&files.server_key_file, server_key),
            (&files.cert_file, client_cert),
            (&files.key_file, client_key),
        ] {
            std::fs::write(file, pem)
                .map_err(|err| context(err, format!("could not write {}", file.display())))?;
        }
        Ok(files)
    }

    /// The CA certificate (PEM) that signed the server and client
    /// certificates: what a client trusts.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The client certificate (PEM), signed by the CA.
    pub fn cert_file(&self) -> &Path {
        &self.cert_file
    }

    /// The client certificate's private key (PEM, PKCS#8).
    pub fn key_file(&self) -> &Path {
        &self.key_file
    }

    /// The server certificate (PEM), for `127.0.0.1` and `localhost`.
    pub fn server_cert_file(&self) -> &Path {
        &self.server_cert_file
    }

    /// The server certificate's private key (PEM, PKCS#8).
    pub fn server_key_file(&self) -> &Path {
        &self.server_key_file
    }

    /// The directory holding the files, removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn certificate_error(err: rcgen::Error) -> io::Error {
    io::Error::other(format!("could not make a test certificate: {err}"))
}
