//! The `tls.*` keys as comet-net's TLS set-up (docs/operations.md#tls).

use comet_net::{ClientTls, ServerTls, ServerTlsSettings, TlsError, TlsMode};

use super::BrokerConfig;

impl BrokerConfig {
    /// The server side of the client port's TLS, as the `tls.server.*` keys say.
    pub fn server_tls_settings(&self) -> ServerTlsSettings {
        ServerTlsSettings {
            mode: self.tls_server_mode,
            cert_path: self.tls_server_cert_path.clone(),
            key_path: self.tls_server_key_path.clone(),
            key_password: self.tls_server_key_password.clone(),
            client_auth: self.tls_server_need_client_auth,
            trust_cert_path: self.tls_server_trust_cert_path.clone(),
        }
    }

    /// Loads the client port's certificate and key; a bad file is an error at start-up.
    pub fn server_tls(&self) -> Result<ServerTls, TlsError> {
        ServerTls::new(&self.server_tls_settings())
    }

    /// The broker's own connections (to name servers, a slave to its master): TLS when
    /// `tls.enable` is on or the broker's port enforces TLS, as Java's `BrokerStartup` sets
    /// its client's `useTLS`. Certificates are checked only with `tls.test.mode.enable` off
    /// and `tls.client.authServer` on, as Java's `TlsHelper` does.
    pub fn client_tls(&self) -> Result<Option<ClientTls>, TlsError> {
        if !self.tls_enable && self.tls_server_mode != TlsMode::Enforcing {
            return Ok(None);
        }
        if self.tls_test_mode_enable || !self.tls_client_auth_server {
            return ClientTls::trusting_any().map(Some);
        }
        let ca = self
            .tls_client_trust_cert_path
            .as_deref()
            .ok_or(TlsError::Missing {
                key: "tls.client.trustCertPath",
                because: "tls.client.authServer checks name servers' certificates",
            })?;
        ClientTls::trusting(ca).map(Some)
    }
}
