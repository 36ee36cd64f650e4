#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the PKI and files of a whole cluster, planned by the provisioning engine, against the same
certificates issued with the openssl command line (how shell-based installers and kubeadm-era scripts do it).

Not a test. For a cluster of --control-plane control-plane nodes and --workers workers (default 5 + 200, a realistic
rack-scale cluster), timed:

  * plan (fresh)   - every node's complete file set from nothing: the authority (3 CAs, service-account key), each
                     control-plane node's 10 leaf certificates and kubeconfigs, every node's kubelet certificate,
                     kubeconfig, manifests, HAProxy config and kubelet files (what genesis + joins write);
  * plan (re-run)  - the same with every file present: each certificate read, checked against its CA, subject,
                     SANs, usages and expiry, and kept (what a second playbook run does);
  * openssl        - the same number of leaf certificates (ECDSA P-256, SANs, usages) issued with
                     `openssl req -new -newkey ec` + `openssl x509 -req -CA`, one key and certificate per leaf,
                     as files (the reference; only certificates, none of the other files).

Prints our figure next to the reference as a ratio, and the peak memory. Writes bench/results/provisioning.json.

    python bench/provisioning.py [--control-plane 5] [--workers 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import new_authority  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node  # noqa: E402

NOW = datetime.datetime.now(datetime.timezone.utc)


def cluster_and_nodes(control_plane: int, workers: int):
    members = [{'name': 'cp%d' % i, 'address': '10.0.0.%d' % (10 + i)} for i in range(1, control_plane + 1)]
    cluster = parse_cluster({'control_plane': members})
    nodes = [parse_node({'node_name': m['name'], 'address': m['address'], 'role': 'control-plane'}, cluster)
             for m in members]
    nodes += [parse_node({'node_name': 'w%d' % i, 'address': '10.1.%d.%d' % (i // 250, i % 250 + 1)}, cluster)
              for i in range(1, workers + 1)]
    boot = (','.join('%s=https://%s:2380' % (m['name'], m['address']) for m in members), 'new')
    return cluster, nodes, boot


def plan_all(cluster, nodes, boot, authority, disks: Dict[str, Dict[str, bytes]]) -> int:
    issued = 0
    for node in nodes:
        disk = disks.setdefault(node.name, {})
        planned = plan_node_files(cluster, node, authority, disk.get, NOW, boot if node.control_plane else None)
        issued += sum(1 for c in planned.certificates if c['action'] != 'keep')
        disk.update({p: f.content for p, f in planned.files.items()})
    return issued


def openssl_issue(count: int, directory: str) -> None:
    """`count` leaf certificates with openssl, each signed by one CA (created first, not timed separately)."""
    ca_key, ca_crt = os.path.join(directory, 'ca.key'), os.path.join(directory, 'ca.crt')
    subprocess.run(['openssl', 'req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                    '-nodes', '-keyout', ca_key, '-out', ca_crt, '-days', '3650', '-subj', '/CN=kubernetes'],
                   check=True, capture_output=True)
    ext = os.path.join(directory, 'ext.cnf')
    with open(ext, 'w') as f:
        f.write('basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n'
                'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:node,DNS:localhost,IP:10.0.0.1,IP:127.0.0.1\n')
    for i in range(count):
        key, csr, crt = (os.path.join(directory, 'leaf%d.%s' % (i, ext_)) for ext_ in ('key', 'csr', 'crt'))
        subprocess.run(['openssl', 'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                        '-keyout', key, '-out', csr, '-subj', '/O=system:nodes/CN=system:node:w%d' % i],
                       check=True, capture_output=True)
        subprocess.run(['openssl', 'x509', '-req', '-in', csr, '-CA', ca_crt, '-CAkey', ca_key, '-CAcreateserial',
                        '-out', crt, '-days', '365', '-extfile', ext], check=True, capture_output=True)


def timed(fn: Callable[[], Any], runs: int) -> Dict[str, Any]:
    times, value = [], None
    for _run in range(runs):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return {'median_s': statistics.median(times), 'runs_s': [round(t, 3) for t in times], 'value': value}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--control-plane', type=int, default=5)
    parser.add_argument('--workers', type=int, default=200)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--out', default=os.path.join(REPO, 'bench', 'results', 'provisioning.json'))
    args = _env.parse_args(parser, 'provisioning', {'control_plane': 1, 'workers': 2, 'runs': 1}, output='out')
    _env.announce(args)
    cluster, nodes, boot = cluster_and_nodes(args.control_plane, args.workers)
    authority = new_authority('ecdsa-p256', NOW, 3650)
    leaves = args.control_plane * 11 + args.workers

    fresh = timed(lambda: plan_all(cluster, nodes, boot, authority, {}), args.runs)
    disks: Dict[str, Dict[str, bytes]] = {}
    plan_all(cluster, nodes, boot, authority, disks)
    rerun = timed(lambda: plan_all(cluster, nodes, boot, authority, disks), args.runs)
    assert rerun['value'] == 0, 'a re-plan must keep every certificate'
    files_per_run = sum(len(d) for d in disks.values())

    reference: Dict[str, Any] = {'median_s': None}
    if shutil.which('openssl'):
        def with_openssl() -> None:
            directory = tempfile.mkdtemp(prefix='bench-openssl-')
            try:
                openssl_issue(leaves, directory)
            finally:
                shutil.rmtree(directory)
        reference = timed(with_openssl, args.runs)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    print('cluster: %d control-plane nodes + %d workers = %d leaf certificates, %d files' % (
        args.control_plane, args.workers, leaves, files_per_run))
    print('%-44s %10s %12s' % ('', 'median s', 'certs/s'))
    print('%-44s %10.2f %12.0f' % ('plan, fresh (steward engine, all files)', fresh['median_s'], leaves / fresh['median_s']))
    print('%-44s %10.2f %12s' % ('plan, re-run (every file checked and kept)', rerun['median_s'], '-'))
    if reference['median_s']:
        print('%-44s %10.2f %12.0f' % ('openssl CLI (certificates only, reference)', reference['median_s'],
                                       leaves / reference['median_s']))
        print('ratio openssl / steward (fresh): %.1fx' % (reference['median_s'] / fresh['median_s']))
    print('peak memory: %.0f MiB' % peak_mib)
    write_summary(args.out, {
        'benchmark': 'provisioning', 'control_plane': args.control_plane, 'workers': args.workers,
        'leaf_certificates': leaves, 'files': files_per_run, 'plan_fresh_s': fresh['median_s'],
        'plan_rerun_s': rerun['median_s'], 'openssl_s': reference['median_s'],
        'ratio_openssl_over_ours': (reference['median_s'] / fresh['median_s']) if reference['median_s'] else None,
        'peak_memory_mib': round(peak_mib, 1), 'runs': args.runs, 'python': platform.python_version(),
        'when': NOW.strftime('%Y-%m-%dT%H:%M:%SZ')})
    return 0


if __name__ == '__main__':
    sys.exit(main())
