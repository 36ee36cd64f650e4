"""EC2 (and S3) with fidelity for the demo and tests: lab/cloud/ec2_fidelity.py (moto's server plus ClientToken idempotency, describe
lag, a request-rate limit and per-Action call counts) as its own process on a free loopback port.

    server = EC2Server().start()
    ec2 = server.client()                       # boto3 EC2 client with the test keys and region
    server.set_describe_lag(5)                  # new instances invisible to DescribeInstances for 5 s
    server.set_rate_limit(2, burst=4)           # RequestLimitExceeded above 2 calls/s; None turns it off
    assert server.calls('DescribeInstances') <= 3
    server.reset()                              # moto's and the layer's state, as new
    server.stop()

Subprocesses (a controller, ansible-playbook) get the endpoint and keys from `server.env`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Optional

import requests

from lab.cloud.ec2_fidelity import LAB_ACCESS_KEY_ID as ACCESS_KEY_ID
from lab.cloud.ec2_fidelity import LAB_REGION as DEFAULT_REGION
from lab.cloud.ec2_fidelity import LAB_SECRET_ACCESS_KEY as SECRET_ACCESS_KEY
from lab.paths import REPO, module_argv

MODULE = 'lab.cloud.ec2_fidelity'


class EC2Server:
    """The EC2 fidelity server in a subprocess; every setting goes through its admin endpoint (/_lab/ec2)."""

    def __init__(self, region: str = DEFAULT_REGION, host: str = '127.0.0.1', port: int = 0) -> None:
        self.region = region
        self.host, self.port = host, port
        self.url = ''
        self.proc: Optional[subprocess.Popen] = None
        self._dir = tempfile.mkdtemp(prefix='steward-ec2-')
        self.log_path = os.path.join(self._dir, 'ec2.log')

    @classmethod
    def at(cls, url: str, region: str = DEFAULT_REGION) -> 'EC2Server':
        """The settings and counts of a fidelity server someone else runs (the lab's: lab/parts.py); stop() leaves
        it running."""
        server = cls(region)
        server.url = url
        return server

    def start(self, timeout: float = 60.0) -> 'EC2Server':
        url_file = os.path.join(self._dir, 'ec2.url')
        with open(self.log_path, 'ab') as log:
            self.proc = subprocess.Popen(
                module_argv(MODULE, 'serve', '--host', self.host, '--port', str(self.port), '--url-file', url_file,
                            python=sys.executable),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(url_file):
                with open(url_file) as f:
                    self.url = f.read().strip()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        with open(self.log_path, errors='replace') as f:
            raise RuntimeError('the EC2 fidelity server did not start within %ss:\n%s' % (timeout, f.read()[-3000:]))

    @property
    def env(self) -> Dict[str, str]:
        """The standard AWS variables for a subprocess (boto3 reads AWS_ENDPOINT_URL)."""
        return {'AWS_ENDPOINT_URL': self.url, 'AWS_ACCESS_KEY_ID': ACCESS_KEY_ID,
                'AWS_SECRET_ACCESS_KEY': SECRET_ACCESS_KEY, 'AWS_DEFAULT_REGION': self.region}

    def client(self, service: str = 'ec2', **config: Any):
        """A boto3 client for this server (botocore Config keywords, e.g. retries={'max_attempts': 1})."""
        import boto3
        from botocore.config import Config
        return boto3.client(service, endpoint_url=self.url, region_name=self.region,
                            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
                            config=Config(**config) if config else None)

    # --- the layer's settings and counts --------------------------------------------------------
    def _admin(self, path: str = '', body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        url = self.url + '/_lab/ec2' + path
        answer = requests.post(url, json=body or {}, timeout=30) if body is not None or path else \
            requests.get(url, timeout=30)
        if answer.status_code != 200:
            raise ValueError('%s: HTTP %s %s' % (url, answer.status_code, answer.text))
        return answer.json()

    def settings(self) -> Dict[str, Any]:
        return self._admin()

    def set_describe_lag(self, seconds: float) -> None:
        """New instances stay out of DescribeInstances for `seconds` (0: immediately consistent, moto's way)."""
        self._admin(body={'describe_lag': seconds})

    def set_rate_limit(self, per_second: Optional[float], burst: Optional[int] = None) -> None:
        """Throttle every EC2 call above `per_second` (bucket of `burst`, default max(1, per_second)); None: off."""
        limit = None if per_second is None else {'per_second': per_second, 'burst': burst or max(1, int(per_second))}
        self._admin(body={'rate_limit': limit})

    def calls(self, action: Optional[str] = None) -> int:
        """EC2 calls received (throttled ones included) for one Action, or all; the lab's own are not counted."""
        counts = self.settings()['calls']
        return counts.get(action, 0) if action else sum(counts.values())

    def throttled(self, action: Optional[str] = None) -> int:
        counts = self.settings()['throttled']
        return counts.get(action, 0) if action else sum(counts.values())

    def reset_counts(self) -> None:
        self._admin(body={'reset_counts': True})

    def reset(self) -> None:
        """Everything as new: moto's state (EC2 and S3), tokens, instance ages, counts, lag and rate limit."""
        self._admin('/reset')

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
