"""TLS for every service: settings, gRPC credentials (certificate rotation on disk) and peer identity."""

from mq_common.tls.credentials import ReloadingCertificates, channel_credentials, channel_options, server_credentials
from mq_common.tls.identity import ComponentGuard, PeerIdentity, peer_identity
from mq_common.tls.settings import TlsClientAuth, TlsClientConfig, TlsServerConfig, TlsSettings, split_names

__all__ = [
    "ComponentGuard",
    "PeerIdentity",
    "ReloadingCertificates",
    "TlsClientAuth",
    "TlsClientConfig",
    "TlsServerConfig",
    "TlsSettings",
    "channel_credentials",
    "channel_options",
    "peer_identity",
    "server_credentials",
    "split_names",
]
