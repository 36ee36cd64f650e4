"""moto's S3 server with what it leaves out of SSE-C (customer-key server-side encryption).

moto accepts the SSE-C headers and ignores them. AWS keeps the key's MD5 with the object, refuses a
read without the key (400) or with another key (403), refuses a key for an object that was not
written with one (400), and names the algorithm and the key's MD5 in HEAD and GET answers. This
WSGI layer in front of moto's app does exactly that, so tests see what AWS would answer.
It is a test double of S3, independent of the collection's code.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, Tuple

ALGORITHM = 'HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_CUSTOMER_ALGORITHM'
KEY_MD5 = 'HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_CUSTOMER_KEY_MD5'
COPY_SOURCE = 'HTTP_X_AMZ_COPY_SOURCE'


def _error(start_response: Callable, status: str, code: str, message: str, head: bool) -> Iterable[bytes]:
    body = b'' if head else ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message>'
                             '</Error>' % (code, message)).encode()
    start_response(status, [('Content-Type', 'application/xml'), ('Content-Length', str(len(body)))])
    return [body]


class SSECustomerFidelity:
    """WSGI middleware: remembers which objects were written with which customer key."""

    def __init__(self, app: Any):
        self.app = app
        self.keys: Dict[Tuple[str, str], str] = {}  # (bucket, key) -> MD5 of the customer key
        self.lock = threading.Lock()

    def __call__(self, environ: Dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        method = environ.get('REQUEST_METHOD', 'GET')
        bucket, _sep, key = environ.get('PATH_INFO', '/').lstrip('/').partition('/')
        query = environ.get('QUERY_STRING', '')
        md5 = environ.get(KEY_MD5)
        if not key:
            return self.app(environ, start_response)
        obj = (bucket, key)
        if method in ('GET', 'HEAD') and not query.startswith(('uploadId', 'uploads', 'tagging', 'acl')):
            with self.lock:
                stored = self.keys.get(obj)
            head = method == 'HEAD'
            if stored and not md5:
                return _error(start_response, '400 Bad Request', 'InvalidRequest', 'The object was stored using a form '
                              'of Server Side Encryption. The correct parameters must be provided to retrieve the '
                              'object.', head)
            if stored and md5 != stored:
                return _error(start_response, '403 Forbidden', 'AccessDenied', 'The calculated MD5 hash of the key '
                              'did not match the hash that was provided.', head)
            if md5 and not stored:
                return _error(start_response, '400 Bad Request', 'InvalidRequest', 'The encryption parameters are not '
                              'applicable to this object.', head)
            if stored:
                def with_headers(status: str, headers: list, exc_info: Any = None) -> Any:
                    headers = headers + [('x-amz-server-side-encryption-customer-algorithm', 'AES256'),
                                         ('x-amz-server-side-encryption-customer-key-MD5', stored)]
                    return start_response(status, headers, exc_info)
                return self.app(environ, with_headers)
            return self.app(environ, start_response)
        written = (method == 'PUT' and 'partNumber' not in query and not environ.get(COPY_SOURCE)) or \
                  (method == 'POST' and query.startswith('uploads'))
        if written:
            with self.lock:
                if md5 and environ.get(ALGORITHM) == 'AES256':
                    self.keys[obj] = md5
                else:
                    self.keys.pop(obj, None)
        elif method == 'DELETE' and not query:
            with self.lock:
                self.keys.pop(obj, None)
        return self.app(environ, start_response)


class FidelityMotoServer:
    """Like moto's ThreadedMotoServer (same in-process backends), with SSECustomerFidelity in front."""

    def __init__(self, ip_address: str = '127.0.0.1', port: int = 0):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server
        app = SSECustomerFidelity(DomainDispatcherApplication(create_backend_app))
        self.server = make_server(ip_address, port, app, True, request_handler=MotoRequestHandler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name='moto-s3', daemon=True)

    def start(self) -> 'FidelityMotoServer':
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join()
