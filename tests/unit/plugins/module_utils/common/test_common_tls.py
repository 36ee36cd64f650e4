"""common/tls: the one TLS context builder, in real handshakes over loopback with the test PKI."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from support.tls import make_pki

from ansible_collections.steward.cluster.plugins.module_utils.common.tls import client_context, server_context


@pytest.fixture(scope='module')
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp('pki')))


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = '127.0.0.1'):
    """One TLS handshake on loopback; returns (the client's ALPN choice, the client certificate the server saw)."""
    listener = socket.create_server(('127.0.0.1', 0))
    seen = {}

    def serve():
        conn = listener.accept()[0]
        try:
            with server.wrap_socket(conn, server_side=True) as tls:
                seen['peer'] = tls.getpeercert()
                tls.sendall(b'x')
        except (ssl.SSLError, OSError) as exc:
            seen['error'] = exc

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                client.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.recv(1) == b'x'
            return tls.selected_alpn_protocol(), seen.get('peer')
    finally:
        thread.join(10)
        listener.close()


def test_defaults_check_the_certificate_and_the_host_name():
    context = client_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_the_server_is_verified_against_the_ca_file_and_alpn_is_offered(pki):
    server = server_context(pki['server_cert'], pki['server_key'])
    server.set_alpn_protocols(['h2'])
    assert handshake(server, client_context(pki['ca'], alpn=['h2'])) == ('h2', None)
    assert handshake(server, client_context(pki['ca']))[0] is None   # nothing offered, nothing chosen
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client_context())                              # the system's CAs do not know the test CA
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client_context(pki['ca']), host='localhost.invalid')


def test_a_client_certificate_is_presented(pki):
    server = server_context(pki['server_cert'], pki['server_key'])
    server.load_verify_locations(pki['ca'])
    server.verify_mode = ssl.CERT_REQUIRED
    peer = handshake(server, client_context(pki['ca'], pki['client_cert'], pki['client_key']))[1]
    assert dict(x[0] for x in peer['subject'])['commonName'] == 'root'   # the test PKI's client certificate


def test_verify_false_checks_nothing_and_reads_no_ca_file(pki, tmp_path):
    context = client_context(str(tmp_path / 'missing.crt'), verify=False)
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    server = server_context(pki['server_cert'], pki['server_key'])
    assert handshake(server, context, host='anything.invalid') == (None, None)


def test_unreadable_files_raise_for_the_caller_to_name_its_option(tmp_path):
    with pytest.raises(OSError):
        client_context(str(tmp_path / 'missing.crt'))
    (tmp_path / 'junk.pem').write_text('not a certificate')
    with pytest.raises(ssl.SSLError):
        client_context(str(tmp_path / 'junk.pem'))
    with pytest.raises(OSError):
        server_context(str(tmp_path / 'missing.crt'), str(tmp_path / 'missing.key'))
