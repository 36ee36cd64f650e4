# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-backup-restore's membership families move when the membership really changes (issue 27 §1), on a real etcd:

- through the calls the etcd_member module and the controller's anchor make (ensure_member_present / absent) and
  the rolling defragmentation of the operator task, the controller's registry (listening as its main() does) counts
  each learner add, promotion, removal and member defragmentation, succeeded or not;
- the member program (its initializer and server, in process) joining a running cluster as a learner and promoting
  itself fills the same families on its own registry (member/metrics.py), with `etcdbr_cluster_size` and
  `etcdbr_is_learner` read from its own etcd; the program as a process answers them on GET /metrics.

Names, types and labels are checked in the exposition text a scrape would read, against seed_metrics.md."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import rolling_defrag
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    ensure_member_absent, ensure_member_present)

from steward_controller.core.metrics import Metrics
from steward_controller.member.initializer import Initializer, MemberOptions
from steward_controller.member.metrics import MemberMetrics, install
from steward_controller.member.server import MemberState

from lab.env.controller import wait_for
from lab.env.ports import free_port
from support.etcd_cluster import EtcdCluster, Member, etcd_bin_dirs
from support.observability import seed_rows

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMBERSHIP = {'etcdbr_cluster_size', 'etcdbr_is_learner', 'etcdbr_is_learner_count_total',
              'etcdbr_add_learner_duration_seconds', 'etcdbr_member_promote_duration_seconds',
              'etcdbr_member_remove_duration_seconds', 'etcdbr_defragmentation_duration_seconds'}


def scrape(text):
    """{(sample name, frozenset(labels)): value} of an exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def families(text):
    """{family name as scraped (counters with `_total`): (type, label names)}."""
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        name = family.name + '_total' if family.type == 'counter' else family.name
        labels = {k for s in family.samples for k in s.labels if k not in ('le',)}
        found[name] = (family.type, labels)
    return found


def new_member(cluster, name):
    cluster.members[name] = Member(name, free_port(), free_port(), os.path.join(cluster.base_dir, name + '.etcd'),
                                   os.path.join(cluster.base_dir, name + '.log'))
    return cluster.members[name]


@pytest.fixture
def cluster(tmp_path):
    dirs = etcd_bin_dirs()
    if not dirs:
        pytest.fail('no etcd binary found: run `make all`')
    etcd = EtcdCluster(str(tmp_path / 'etcd'), 3, dirs[0]).start()
    yield etcd
    etcd.stop()


def test_module_and_controller_calls_fill_the_controllers_membership_families(cluster):
    metrics = Metrics()
    stop = timing.listen(metrics.seed.membership.observe)      # as the controller's main() does
    try:
        conn = EtcdConnection(endpoints=tuple(cluster.endpoints), timeout=2.0)
        before = scrape(metrics.render())
        for family in ('etcdbr_is_learner_count_total', 'etcdbr_add_learner_duration_seconds_count',
                       'etcdbr_member_promote_duration_seconds_count', 'etcdbr_member_remove_duration_seconds_count'):
            assert value(before, family, succeeded='true') == 0 and value(before, family, succeeded='false') == 0

        m4 = new_member(cluster, 'etcd4')
        added = ensure_member_present(conn, name='etcd4', peer_urls=[m4.peer_url], promote=False)
        after_add = scrape(metrics.render())
        assert value(after_add, 'etcdbr_is_learner_count_total', succeeded='true') == 1
        assert value(after_add, 'etcdbr_add_learner_duration_seconds_count', succeeded='true') == 1
        assert 0 < value(after_add, 'etcdbr_add_learner_duration_seconds_sum', succeeded='true') < 60

        # the learner started: its own member program would say "learner" and count the cluster's four members
        cluster.start_member('etcd4', state='existing', initial_cluster=added['initial_cluster'])
        own = MemberMetrics(EtcdConnection(endpoints=(m4.client_url,), timeout=2.0),
                            EtcdConnection(endpoints=tuple(cluster.endpoints), timeout=2.0))
        try:
            seen = wait_for(lambda: scrape(own.exposition()[0]).get(('etcdbr_is_learner', frozenset())) is not None
                            and scrape(own.exposition()[0]), 30, 0.2, 'the learner serving')
            assert value(seen, 'etcdbr_is_learner') == 1 and value(seen, 'etcdbr_cluster_size') == 4
            ensure_member_present(conn, name='etcd4', peer_urls=[m4.peer_url], promote_timeout=30)
            promoted = scrape(own.exposition()[0])
            assert value(promoted, 'etcdbr_is_learner') == 0
            assert value(promoted, 'etcdbr_member_promote_duration_seconds_count', succeeded='true') == 1
        finally:
            own.close()
        samples = scrape(metrics.render())
        assert value(samples, 'etcdbr_member_promote_duration_seconds_count', succeeded='true') == 1
        assert value(samples, 'etcdbr_member_promote_duration_seconds_count', succeeded='false') == 0

        # a learner that never starts cannot be promoted: a failed promotion, then its removal
        m5 = new_member(cluster, 'etcd5')
        result = ensure_member_present(conn, name='etcd5', peer_urls=[m5.peer_url], promote_timeout=1)
        assert result['added'] and not result['promoted'] and result['warnings']
        ensure_member_absent(conn, peer_url=m5.peer_url)        # never started: it has no name yet
        samples = scrape(metrics.render())
        assert value(samples, 'etcdbr_is_learner_count_total', succeeded='true') == 2
        assert value(samples, 'etcdbr_member_promote_duration_seconds_count', succeeded='false') == 1
        assert value(samples, 'etcdbr_member_remove_duration_seconds_count', succeeded='true') == 1

        # the operator task's rolling defragmentation: one observation per member, by endpoint
        done = rolling_defrag(conn)
        assert [m['status'] for m in done['members']] == ['defragmented'] * 4
        samples = scrape(metrics.render())
        for m in done['members']:
            assert value(samples, 'etcdbr_defragmentation_duration_seconds_count', succeeded='true',
                         endpoint=m['endpoint']) == 1
    finally:
        stop()

    # names, types and labels as the seed lists them (seed_metrics.md)
    exported = families(metrics.render())
    for row in seed_rows():
        if row['family'] in MEMBERSHIP - {'etcdbr_cluster_size', 'etcdbr_is_learner'}:
            kind, labels = exported[row['family'].replace('_total', '') + '_total'
                                    if row['type'] == 'counter' else row['family']]
            assert kind == row['type'] and set(row['labels']) <= labels, (row, kind, labels)


def test_the_member_program_joining_as_a_learner_fills_its_own_families(cluster, tmp_path):
    """Druid's row 9 (scale-up, create-as-learner): the program's initializer adds its member as a learner, etcd
    starts from the config it serves, the program promotes it; its /metrics registry shows each step."""
    m4 = new_member(cluster, 'etcd4')
    options = MemberOptions(name='etcd4', data_dir=m4.data_dir, cluster_size=3, initial_cluster='',
                            peer_urls=(m4.peer_url,), endpoints=tuple(cluster.endpoints) + (m4.client_url,),
                            learner_wanted=True, client_url=m4.client_url)
    state = MemberState(Initializer(options, None, EtcdConnection(endpoints=options.endpoints, timeout=2.0)), {},
                        upload_timeout=60)
    metrics = install(state)
    try:
        assert state.metrics is metrics
        idle = scrape(metrics.exposition()[0])
        assert value(idle, 'etcdbr_is_learner') is None, 'no sample while its etcd does not serve'
        assert state.start('full', 0)
        wait_for(lambda: state.status != 'Progress', 60, 0.1, 'the initialization')
        assert state.status == 'Successful', (state.error, state.initializer.last)
        assert state.initializer.last['decision']['action'] == 'join-as-learner'
        joined = scrape(metrics.exposition()[0])
        assert value(joined, 'etcdbr_is_learner_count_total', succeeded='true') == 1
        assert value(joined, 'etcdbr_add_learner_duration_seconds_count', succeeded='true') == 1

        started = time.monotonic()
        cluster.start_member('etcd4', state='existing', initial_cluster=state.config()['initial-cluster'])
        wait_for(lambda: state.promoted, 60, 0.2, 'the promotion (%s)' % state.error)
        samples = scrape(metrics.exposition()[0])
        assert value(samples, 'etcdbr_member_promote_duration_seconds_count', succeeded='true') == 1
        assert 0 < value(samples, 'etcdbr_member_promote_duration_seconds_sum', succeeded='true') \
            < time.monotonic() - started + 1
        assert value(samples, 'etcdbr_cluster_size') == 4 and value(samples, 'etcdbr_is_learner') == 0
        exported = families(metrics.exposition()[0])
        assert MEMBERSHIP <= set(exported)
        assert exported['etcdbr_cluster_size'] == ('gauge', set())
        assert exported['etcdbr_is_learner'] == ('gauge', set())
    finally:
        metrics.close()


def test_the_member_programs_metrics_endpoint(tmp_path):
    """The program as a process (`python -m steward_controller.member.main`), one member started from the config it
    serves: GET /metrics answers the membership families with etcd-backup-restore's names and labels."""
    dirs = etcd_bin_dirs()
    if not dirs:
        pytest.fail('no etcd binary found: run `make all`')
    client, peer, port = free_port(), free_port(), free_port()
    bootstrap = {'name': 'etcd-main-0', 'initial-cluster': 'etcd-main-0=http://127.0.0.1:%d' % peer,
                 'initial-advertise-peer-urls': 'http://127.0.0.1:%d' % peer,
                 'listen-peer-urls': 'http://127.0.0.1:%d' % peer, 'listen-client-urls': 'http://127.0.0.1:%d' % client,
                 'advertise-client-urls': 'http://127.0.0.1:%d' % client, 'initial-cluster-token': 'etcd-cluster'}
    (tmp_path / 'bootstrap.yaml').write_text(yaml.safe_dump(bootstrap))
    base = 'http://127.0.0.1:%d' % port
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, 'controller') + os.pathsep + os.environ.get('PYTHONPATH', ''))
    with open(str(tmp_path / 'member.log'), 'ab') as log:
        program = subprocess.Popen([sys.executable, '-m', 'steward_controller.member.main', '--config-file',
                                    str(tmp_path / 'bootstrap.yaml'), '--data-dir', str(tmp_path / 'data'),
                                    '--server-host', '127.0.0.1', '--server-port', str(port),
                                    '--k8s-heartbeat-duration', '1h'], stdout=log, stderr=subprocess.STDOUT, env=env)
    etcd = None
    try:
        wait_for(lambda: _get(base + '/initialization/status') == b'New', 30, 0.1, 'the program serving')
        _get(base + '/initialization/start?mode=full')
        wait_for(lambda: _get(base + '/initialization/status') == b'Successful', 30, 0.1, 'the initialization')
        assert _get(base + '/metrics'), ('GET /metrics is not answered: member/main.py must call metrics.install(state) '
                                         'and member/server.py route /metrics (member/metrics.py says how)')
        config = tmp_path / 'etcd.conf.yaml'
        config.write_bytes(_get(base + '/config'))
        with open(str(tmp_path / 'etcd.log'), 'ab') as log:
            etcd = subprocess.Popen([os.path.join(dirs[0], 'etcd'), '--config-file', str(config)], stdout=log,
                                    stderr=subprocess.STDOUT,
                                    env={k: v for k, v in os.environ.items() if not k.startswith('ETCD_')})
        samples = wait_for(lambda: value(scrape(_get(base + '/metrics')), 'etcdbr_cluster_size') is not None
                           and scrape(_get(base + '/metrics')), 30, 0.2, 'etcd serving, scraped')
        assert value(samples, 'etcdbr_cluster_size') == 1 and value(samples, 'etcdbr_is_learner') == 0
        for family in ('etcdbr_is_learner_count_total', 'etcdbr_add_learner_duration_seconds_count',
                       'etcdbr_member_promote_duration_seconds_count', 'etcdbr_member_remove_duration_seconds_count'):
            assert value(samples, family, succeeded='true') == 0 and value(samples, family, succeeded='false') == 0
        exported = families(_get(base + '/metrics'))
        for row in seed_rows():
            if row['family'] in MEMBERSHIP:
                kind, labels = exported[row['family']]
                assert kind == row['type'], (row, kind)
                if row['family'] != 'etcdbr_defragmentation_duration_seconds':   # no defragmentation yet: no series
                    assert set(row['labels']) == labels, (row, labels)
    finally:
        for proc in (etcd, program):
            if proc is not None:
                proc.terminate()
                proc.wait(20)


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read()
    except OSError:
        return b''
