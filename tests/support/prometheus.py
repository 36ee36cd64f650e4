"""Debian's prometheus as a test process: started with a configuration given as data (lab/prometheus.py writes it and
builds the command line, as for the lab's part), on a free loopback port, returned once /-/ready answers."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from typing import Any, Dict

from lab import prometheus as lab_prometheus
from lab.env.controller import wait_for
from lab.env.ports import free_port


class PrometheusProcess:
    def __init__(self, work: str, config: Dict[str, Any], address: str = ''):
        os.makedirs(work, exist_ok=True)
        self.address = address or '127.0.0.1:%d' % free_port()
        path = os.path.join(work, 'prometheus.yml')
        lab_prometheus.write_config(path, config)
        self.log_path = os.path.join(work, 'prometheus.log')
        self.log = open(self.log_path, 'wb')
        self.proc = subprocess.Popen(lab_prometheus.argv(lab_prometheus.binary(), path, os.path.join(work, 'data'),
                                                         self.address), stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(self.ready, 60, 0.2, 'prometheus ready (%s)' % self.log_path)
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen('http://%s/-/ready' % self.address, timeout=5) as answer:
                return answer.status == 200
        except OSError:
            assert self.proc.poll() is None, 'prometheus exited with %s' % self.proc.returncode
            return False

    def api(self, path: str, **params: str) -> Any:
        """The `data` of /api/v1/<path>; fails unless the answer's status is success."""
        url = 'http://%s/api/v1/%s' % (self.address, path)
        if params:
            url += '?' + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body['status'] == 'success', body
        return body['data']

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
