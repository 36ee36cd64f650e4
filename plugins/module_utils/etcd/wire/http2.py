# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gRPC call on its own HTTP/2 connection (RFC 9113): etcd's two long streams (Snapshot and Watch) and the
calls of calls.py.

Why not grpcio: a snapshot is ~11,000 messages of 32 KiB and a backlog of watch events as many; grpcio
hands each message through its own threads and a protobuf object, and costs more CPU than etcd spends
sending it (0.9 s against etcd's 1.5 s for 361 MB, 2 cores), and it holds a whole watch response (17 MB
for 1,000 revisions of 16 puts) several times over. Here one thread reads the socket into one reused
buffer and hands each read's DATA bytes over as memoryview slices: nothing is copied on the way, and
the bytes in flight are what the flow-control window allows.

Scope: a client with one stream at a time (id 1, then 3, 5, ... for calls made one after the other on
the same connection: `call_again`); gRPC messages uncompressed, sent within etcd's flow-control windows;
request headers as plain HPACK literals; the server's headers decoded in full (hpack.py). The messages' bytes go to protobuf.py's
`FieldReader` as they arrive, so a message of any size is never held whole.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote_to_bytes

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.common.tls import client_context
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire import hpack
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable

PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE = 0x2, 0x4
STREAM = 1                 # the first call's stream; call_again takes the next odd id
MAX_WINDOW = (1 << 31) - 1
DEFAULT_WINDOW = 65535
FRAME_HEADER = 9
MAX_FRAME = 16384          # the default SETTINGS_MAX_FRAME_SIZE; neither side raises it, so no frame is larger
RECEIVE_BUFFER = 1 << 20   # one reused buffer per call
KEEPALIVE = (('TCP_KEEPIDLE', 30), ('TCP_KEEPINTVL', 10), ('TCP_KEEPCNT', 3))  # a silent peer is dead in ~1 min

# gRPC status codes (grpc/doc/statuscodes.md) named in messages.
STATUS_NAMES = {1: 'CANCELLED', 2: 'UNKNOWN', 3: 'INVALID_ARGUMENT', 4: 'DEADLINE_EXCEEDED', 5: 'NOT_FOUND',
                6: 'ALREADY_EXISTS', 7: 'PERMISSION_DENIED', 8: 'RESOURCE_EXHAUSTED', 9: 'FAILED_PRECONDITION',
                10: 'ABORTED', 11: 'OUT_OF_RANGE', 12: 'UNIMPLEMENTED', 13: 'INTERNAL', 14: 'UNAVAILABLE',
                15: 'DATA_LOSS', 16: 'UNAUTHENTICATED'}


class GrpcError(EtcdUnavailable):
    """The call failed: `status` is the gRPC status code (0 when the transport failed before one came)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


def _frame(kind: int, flags: int, stream: int, payload: bytes = b'') -> bytes:
    return struct.pack('>I', len(payload))[1:] + bytes((kind, flags)) + struct.pack('>I', stream) + payload


def grpc_message(payload: bytes) -> bytes:
    """One uncompressed gRPC message: flag, length, payload."""
    return b'\x00' + struct.pack('>I', len(payload)) + payload


def _open_socket(conn: EtcdConnection, endpoint: str, timeout: float) -> Tuple[socket.socket, str]:
    host, port = conn.host_port(endpoint)
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in KEEPALIVE:
            if hasattr(socket, name):
                raw.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
        if not conn.url(endpoint).startswith('https://'):
            return raw, 'http'
        both = bool(conn.client_cert and conn.client_key)   # a client certificate only with its key
        context = client_context(conn.ca_cert or None, conn.client_cert if both else None,
                                 conn.client_key if both else None, alpn=['h2'])
        return context.wrap_socket(raw, server_hostname=host), 'https'
    except BaseException:
        raw.close()
        raise


class GrpcCall:
    """One gRPC call to `method` on `endpoint`, on a connection of its own.

    `window`: the bytes etcd may send ahead of what the caller has taken (the memory a slow reader lets
    pile up, in the kernel); `deadline`: the whole call's (None for a watch, which lives until closed).
    Use: `start(first request)`, then `receive()` until it returns None; `close()` from any thread ends it.
    A unary method may then be called again on the same connection: `call_again(request, deadline)`."""

    def __init__(self, conn: EtcdConnection, endpoint: str, method: str, *, window: int = 4 << 20,
                 deadline: Optional[Deadline] = None):
        self.conn = conn
        self.endpoint = conn.url(endpoint)
        self.method = method
        self.window = min(max(window, DEFAULT_WINDOW), MAX_WINDOW)
        self.deadline = deadline
        self.sock: Optional[socket.socket] = None
        self.stream = STREAM
        self._scheme = 'http'
        self.received = 0              # DATA payload bytes handed over
        self._buffer = bytearray(RECEIVE_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = self._end = 0    # unparsed bytes in the buffer
        self._credit = 0               # bytes taken by the caller and not yet given back as window
        self._decoder = hpack.Decoder()
        self._header_block = bytearray()
        self._header_flags = 0
        self._headers_seen = False
        self._trailers: Optional[Dict[bytes, bytes]] = None
        self._closed = False
        self._token: Optional[str] = None
        # what etcd lets us send (RFC 9113 6.9): its connection window and this stream's
        self._peer_initial = self._send_connection = self._send_stream = DEFAULT_WINDOW

    # --- setting up ----------------------------------------------------------------------------
    def _timeout(self) -> Optional[float]:
        return self.deadline.remaining() if self.deadline is not None else None

    def start(self, message: bytes, end_stream: bool = True) -> 'GrpcCall':
        """Connect, send the headers and the first request message (`end_stream`: the only one)."""
        timeout = self.deadline.remaining() if self.deadline is not None else self.conn.timeout
        token = None
        if self.conn.user:
            with Gateway(self.conn) as gateway:
                token = gateway.token(self.endpoint, timeout)
        try:
            self.sock, self._scheme = _open_socket(self.conn, self.endpoint, timeout)
        except (OSError, ssl.SSLError) as exc:
            raise GrpcError('cannot connect to %s: %s' % (self.endpoint, exc)) from exc
        self._token = token
        settings = struct.pack('>HI', SETTINGS_ENABLE_PUSH, 0) + struct.pack('>HI', SETTINGS_INITIAL_WINDOW_SIZE,
                                                                             self.window)
        out = bytearray(PREFACE + _frame(SETTINGS, 0, 0, settings))
        if self.window > DEFAULT_WINDOW:
            out += _frame(WINDOW_UPDATE, 0, 0, struct.pack('>I', self.window - DEFAULT_WINDOW))
        out += _frame(HEADERS, END_HEADERS, self.stream, hpack.encode(self._request_headers()))
        self._send_data(message, end_stream, out)
        return self

    def _request_headers(self) -> List[Tuple[bytes, bytes]]:
        headers = [(b':method', b'POST'), (b':scheme', self._scheme.encode()), (b':path', self.method.encode()),
                   (b':authority', self.endpoint.split('://', 1)[1].encode()),
                   (b'content-type', b'application/grpc'), (b'te', b'trailers'),
                   (b'user-agent', b'steward-cluster')]
        if self.deadline is not None:
            headers.append((b'grpc-timeout', b'%dm' % min(int(self.deadline.remaining() * 1000), 99999999)))
        if self._token:
            headers.append((b'token', self._token.encode()))
        return headers

    def call_again(self, message: bytes, deadline: Optional[Deadline] = None) -> 'GrpcCall':
        """The method again, with one request `message`, on the next stream of this connection, once the last
        call ended (receive() returned None): a replay's thousands of transactions cost one connection, not one
        each (and no port left in TIME_WAIT per call). `deadline`: this call's."""
        if self.sock is None or self._trailers is None:
            raise GrpcError('%s on %s: the last call has not ended' % (self.method, self.endpoint))
        self.stream += 2
        self.deadline = deadline
        self._headers_seen, self._trailers, self._header_block, self._header_flags = False, None, bytearray(), 0
        self._send_stream = self._peer_initial
        out = bytearray(_frame(HEADERS, END_HEADERS, self.stream, hpack.encode(self._request_headers())))
        self._send_data(message, True, out)
        return self

    def send(self, message: bytes) -> None:
        """Another request message on a stream opened with end_stream=False."""
        self._send_data(message, False, bytearray())

    def _send_data(self, message: bytes, end_stream: bool, out: bytearray) -> None:
        """`out` and then the message as DATA frames of at most MAX_FRAME bytes, within etcd's windows: a
        request larger than they allow (a transaction of large values) waits for its WINDOW_UPDATEs."""
        data = memoryview(grpc_message(message))
        pos = 0
        while True:
            size = min(len(data) - pos, MAX_FRAME, self._send_connection, self._send_stream)
            if size <= 0 and pos < len(data):
                self._send(bytes(out))
                out.clear()
                self._wait_for_window()
                continue
            end = pos + size
            last = end == len(data)
            out += _frame(DATA, END_STREAM if end_stream and last else 0, self.stream, data[pos:end])
            self._send_connection -= size
            self._send_stream -= size
            pos = end
            if last:
                self._send(bytes(out))
                return

    def _wait_for_window(self) -> None:
        """Read etcd's frames until a WINDOW_UPDATE opens both windows; an answer before the request is sent
        whole ends the call (etcd refused it: its status is raised). The windows are checked after every parse
        and before every read: a WINDOW_UPDATE already read into the buffer must not be followed by a read that
        waits for a frame etcd will never send (it waits for our data: a stall until the call's deadline)."""
        while True:
            if self._parse():
                raise GrpcError('%s answered %s before the request was sent whole' % (self.endpoint, self.method))
            if self._trailers is not None:
                self._check_status()
                raise GrpcError('%s ended %s before the request was sent whole' % (self.endpoint, self.method))
            if self._send_connection > 0 and self._send_stream > 0:
                return
            self._read()

    def _send(self, data: bytes) -> None:
        try:
            self.sock.settimeout(self.deadline.remaining() if self.deadline is not None else self.conn.timeout)
            self.sock.sendall(data)
        except (OSError, ssl.SSLError) as exc:
            raise self._failed('sending to', exc) from exc

    def _failed(self, doing: str, exc: BaseException) -> GrpcError:
        if self._closed:
            return GrpcError('the call to %s was closed' % self.endpoint)
        if isinstance(exc, socket.timeout) and self.deadline is not None:
            return GrpcError('%s %s did not finish within %.0fs (%d bytes received)' % (
                self.method, self.endpoint, self.deadline.timeout, self.received), 4)
        return GrpcError('%s %s failed after %d bytes: %s: %s' % (
            doing, self.endpoint, self.received, exc.__class__.__name__, exc))

    # --- receiving -----------------------------------------------------------------------------
    def receive(self) -> Optional[List[memoryview]]:
        """The DATA bytes of the next socket read(s), as slices of the receive buffer, valid until the next
        call (which also gives their window back to etcd); never empty; None once the call ended with status
        OK. A non-OK status or a broken connection raises GrpcError."""
        if self._credit:
            self._give_back()
        while True:
            out = self._parse()
            if out:
                return out
            if self._trailers is not None:
                self._check_status()
                return None
            self._read()

    def _read(self) -> None:
        if self._start:
            left = self._end - self._start
            self._buffer[:left] = self._buffer[self._start:self._end]
            self._start, self._end = 0, left
        try:
            self.sock.settimeout(self._timeout())
            count = self.sock.recv_into(self._view[self._end:])
        except (OSError, ssl.SSLError) as exc:
            raise self._failed('reading from', exc) from exc
        if not count:
            raise GrpcError('the call to %s was closed' % self.endpoint if self._closed else
                            '%s closed the connection after %d bytes, before the call ended' % (
                                self.endpoint, self.received))
        self._end += count

    def _parse(self) -> List[memoryview]:
        """Every whole frame in the buffer; returns our stream's DATA payloads."""
        out: List[memoryview] = []
        buf, view = self._buffer, self._view
        while self._end - self._start >= FRAME_HEADER and self._trailers is None:
            start = self._start
            length = (buf[start] << 16) | (buf[start + 1] << 8) | buf[start + 2]
            if length > MAX_FRAME:
                raise GrpcError('%s sent a %d-byte frame (at most %d allowed)' % (self.endpoint, length, MAX_FRAME))
            if self._end - start < FRAME_HEADER + length:
                break
            kind, flags = buf[start + 3], buf[start + 4]
            stream = struct.unpack_from('>I', buf, start + 5)[0] & 0x7FFFFFFF
            begin, end = start + FRAME_HEADER, start + FRAME_HEADER + length
            self._start = end
            if kind == DATA and stream == self.stream:
                self._credit += length
                if flags & PADDED:
                    begin, end = begin + 1, end - buf[begin]
                if end > begin:
                    out.append(view[begin:end])
                    self.received += end - begin
                if flags & END_STREAM:
                    raise GrpcError('%s ended the call without a gRPC status' % self.endpoint)
            elif kind in (HEADERS, CONTINUATION) and stream == self.stream:
                self._headers(kind, flags, bytes(view[begin:end]))
            else:
                self._control(kind, flags, stream, view[begin:end])
        return out

    def _control(self, kind: int, flags: int, stream: int, payload: memoryview) -> None:
        if kind == SETTINGS and not flags & ACK:
            for at in range(0, len(payload) - 5, 6):
                ident, value = struct.unpack_from('>HI', payload, at)
                if ident == SETTINGS_INITIAL_WINDOW_SIZE:   # applies to open streams too (RFC 9113 6.9.2)
                    self._send_stream += value - self._peer_initial
                    self._peer_initial = value
            self._send(_frame(SETTINGS, ACK, 0))
        elif kind == WINDOW_UPDATE and len(payload) == 4:
            increment = struct.unpack('>I', payload)[0] & 0x7FFFFFFF
            if stream == 0:
                self._send_connection += increment
            elif stream == self.stream:
                self._send_stream += increment
        elif kind == PING and not flags & ACK:
            self._send(_frame(PING, ACK, 0, bytes(payload)))
        elif kind == RST_STREAM and stream == self.stream:
            raise GrpcError('%s reset the call (HTTP/2 error %d)' % (self.endpoint, struct.unpack('>I', payload)[0]))
        elif kind == GOAWAY:
            last, code = struct.unpack_from('>II', payload)
            if (last & 0x7FFFFFFF) < self.stream or code:
                raise GrpcError('%s closed the connection (GOAWAY, HTTP/2 error %d): %s' % (
                    self.endpoint, code, bytes(payload[8:]).decode('utf-8', 'replace')[:200]))
        elif kind == PUSH_PROMISE:
            raise GrpcError('%s pushed a stream although push is off' % self.endpoint)
        # PRIORITY, frames of ended streams and unknown frame types are ignored (RFC 9113 5.5)

    def _headers(self, kind: int, flags: int, payload: bytes) -> None:
        if kind == HEADERS:
            if flags & PADDED:
                payload = payload[1:len(payload) - payload[0]]
            if flags & PRIORITY_FLAG:
                payload = payload[5:]
            self._header_block = bytearray(payload)
            self._header_flags = flags
        else:
            self._header_block += payload
        if not flags & END_HEADERS:
            return
        try:
            block = dict(self._decoder.decode(bytes(self._header_block)))
        except hpack.HpackError as exc:
            raise GrpcError('%s sent headers that cannot be decoded: %s' % (self.endpoint, exc)) from exc
        if not self._headers_seen:
            self._headers_seen = True
            status = block.get(b':status', b'')
            if status != b'200':
                raise GrpcError('%s answered HTTP %s to %s, not gRPC' % (self.endpoint, status.decode(), self.method))
            if not self._header_flags & END_STREAM:
                return  # the response headers; the trailers come after the messages
        if not self._header_flags & END_STREAM:
            raise GrpcError('%s sent a second header block that does not end the call' % self.endpoint)
        self._trailers = block

    def _check_status(self) -> None:
        trailers = self._trailers or {}
        try:
            status = int(trailers.get(b'grpc-status', b'2'))
        except ValueError:
            status = 2
        if status:
            message = unquote_to_bytes(trailers.get(b'grpc-message', b'')).decode('utf-8', 'replace')
            name = STATUS_NAMES.get(status, status)
            raise GrpcError('%s on %s failed: %s (%s)' % (self.method, self.endpoint, message or 'no message', name),
                            status)

    def _give_back(self) -> None:
        """Window updates for what the caller has taken, once half the window is used (fewer frames)."""
        if self._credit * 2 < self.window:
            return
        update = struct.pack('>I', self._credit)
        self._credit = 0
        self._send(_frame(WINDOW_UPDATE, 0, 0, update) + _frame(WINDOW_UPDATE, 0, self.stream, update))

    def close(self) -> None:
        """End the call (any thread): a blocked receive() then raises GrpcError."""
        self._closed = True
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def wrap_error(endpoint: str, doing: str, exc: BaseException) -> EtcdError:
    """An EtcdError for anything a call raised (GrpcError stays what it is)."""
    if isinstance(exc, EtcdError):
        return exc
    return GrpcError('%s on %s failed: %s: %s' % (doing, endpoint, exc.__class__.__name__, exc))
