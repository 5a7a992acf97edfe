//! Test certificates for TLS tests, made at test time so no private key is ever committed: a
//! CA, and a server certificate it signs for `localhost` and `127.0.0.1`, written as PEM files
//! into a temporary directory (removed on drop).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use crate::TempDir;

/// PEM files of a fresh CA and a server certificate signed by it.
pub struct TestCertificates {
    /// The directory holding the files.
    pub dir: TempDir,
    /// The CA certificate (what a client trusts: `tls.client.trustCertPath`).
    pub ca_cert: PathBuf,
    /// The server's certificate (`tls.server.certPath`).
    pub server_cert: PathBuf,
    /// The server's private key, PKCS#8 (`tls.server.keyPath`).
    pub server_key: PathBuf,
    /// A certificate signed by the CA for a client (`tls.client.certPath`).
    pub client_cert: PathBuf,
    /// The client's private key (`tls.client.keyPath`).
    pub client_key: PathBuf,
}

impl TestCertificates {
    /// Makes the CA, the server and the client certificates in a new temporary directory.
    pub fn new(name: &str) -> TestCertificates {
        let dir = TempDir::new(name);
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Comet test CA");
        let ca_key = KeyPair::generate().expect("a CA key");
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).expect("the CA certificate");
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let server_key = KeyPair::generate().expect("a server key");
        let server = CertificateParams::new(names.clone())
            .expect("server params")
            .signed_by(&server_key, &ca)
            .expect("the server certificate");
        let client_key = KeyPair::generate().expect("a client key");
        let client = CertificateParams::new(vec!["comet-test-client".to_owned()])
            .expect("client params")
            .signed_by(&client_key, &ca)
            .expect("the client certificate");
        let write = |file: &str, text: String| {
            let path = dir.path().join(file);
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        TestCertificates {
            ca_cert: write("ca.pem", ca.pem()),
            server_cert: write("server.pem", server.pem()),
            server_key: write("server.key", server_key.serialize_pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            dir,
        }
    }
}
