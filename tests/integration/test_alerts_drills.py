# -*- coding: utf-8 -*-
"""Alert drills (issue 27 §4): the shipped rule files in a real Prometheus (Debian's binary, configured as the lab's:
lab/prometheus.py) scraping three real etcd members and the real controller (its etcd-backup loop on a Local store and
its provisioning anchor on a directory tree), faults injected for real, answers read from Prometheus's HTTP API.

- healthy and idle: nothing pending or firing for longer than any (shortened) `for`; every panel query of every
  dashboard parses in this Prometheus, and every panel of the etcd dashboard (etcd and backups) returns data;
  the membership families of seed 004 carry the real cluster (3 members, none a learner);
- a backup whose schedule was missed (the newest stored full snapshot 26 hours old, etcd unreachable for that
  EtcdBackup) -> EtcdBackupStale and EtcdBackupNotReady for that EtcdBackup only;
- a certificate 20 days from expiry (a real short-lived certificate anchored onto the node) ->
  KubernetesCertificateExpiringSoon (the warning) for that file only, not the critical KubernetesCertificateExpiring;
  its source removed (the anchor removes the file) -> the warning resolves;
- two of three etcd members killed -> EtcdInsufficientMembers fires within its `for` plus one evaluation interval
  of turning pending, EtcdMembersDown and EtcdNoLeader (the survivor's) fire too; the members restarted -> all three
  resolve;
- every node partitioned (the real prober and machines loop, `--controllers prober,machines`, on node Leases that
  stop being renewed) -> DependencyWatchdogScaledDown, and MachineFleetFrozen (the machines loop freezes replacement
  while the prober holds its targets down); healed -> both resolve.

The `for` durations: the rule files are loaded as shipped except that every `for:` is rewritten to DRILL_FOR - a
mechanical rewrite of durations only (expressions, thresholds, labels untouched), so a 3 m or 1 h alert fires within
seconds. The promtool unit tests (tests/unit/observability) prove the shipped `for` values with a simulated clock.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import shutil
import time

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import snapshot_to_store
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, pki

from lab import prometheus as lab_prometheus
from lab.env.controller import ControllerProcess, wait_for
from lab.env.ports import free_port
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs
from support.observability import ROOT, seed_rows
from support.prometheus import PrometheusProcess
from support.watchdog_env import NS as NS_WATCHDOG, Env, prober_config

PROMETHEUS = lab_prometheus.binary()
INTERVAL = 2.0            # scrape and evaluation interval (the lab's DRILL_INTERVAL)
DRILL_FOR = 6.0           # every `for:` of the shipped rules, rewritten
NS = 'drills'
BACKUPS = '/apis/cluster.steward.io/v1alpha1/namespaces/%s/etcdbackups' % NS
DASHBOARDS = sorted(glob.glob(os.path.join(ROOT, 'observability', 'grafana', 'dashboards', '*.json')))

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason='prometheus is not installed (Debian package prometheus; '
                                'bindep.txt)')


def shortened_rules(out_dir):
    """The shipped rule files with every `for` set to DRILL_FOR, nothing else changed; their paths."""
    paths = []
    for path in lab_prometheus.rule_files():
        with open(path) as f:
            data = yaml.safe_load(f)
        for group in data['groups']:
            for rule in group['rules']:
                if 'for' in rule:
                    rule['for'] = '%ds' % DRILL_FOR
        target = os.path.join(out_dir, os.path.basename(path))
        with open(target, 'w') as f:
            yaml.safe_dump(data, f)
        paths.append(target)
    return paths


class Prometheus(PrometheusProcess):
    """Debian's prometheus with the lab's configuration (lab/prometheus.py) and the shortened rules."""

    def __init__(self, work, etcd_urls, controller_url):
        address = '127.0.0.1:%d' % free_port()
        os.makedirs(work, exist_ok=True)
        super().__init__(work, lab_prometheus.config(etcd_urls, controller_url, address, shortened_rules(work),
                                                     '%ds' % INTERVAL), address)

    def query(self, expr):
        return self.api('query', query=expr)['result']

    def alerts(self):
        """[(alertname, state, labels)] of every pending or firing alert."""
        return [(a['labels']['alertname'], a['state'], a['labels']) for a in self.api('alerts')['alerts']]

    def firing(self, name):
        return [labels for alert, state, labels in self.alerts() if alert == name and state == 'firing']


def cert_source(kube, name, cert_pem):
    """A ConfigMap the anchor writes to /etc/kubernetes/pki/<name>.crt on its node."""
    kube.create('/api/v1/namespaces/kube-system/configmaps', {
        'apiVersion': 'v1', 'kind': 'ConfigMap',
        'metadata': {'name': name, 'namespace': 'kube-system', 'labels': {anchor.SOURCE_LABEL: 'true'},
                     'annotations': {anchor.PATH_ANNOTATION: '/etc/kubernetes/pki'}},
        'data': {name + '.crt': cert_pem.decode()}})


def backup_body(name, endpoints, store_dir, **spec):
    body = {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'EtcdBackup', 'metadata': {'name': name, 'namespace': NS},
            'spec': {'etcd': {'endpoints': endpoints}, 'store': {'provider': 'Local', 'path': store_dir, 'prefix': name},
                     'deltaSnapshotPeriod': '1s', 'garbageCollectionPeriod': '1h'}}
    body['spec'].update(spec)
    return body


def panels(path):
    with open(path) as f:
        dashboard = json.load(f)
    for panel in dashboard['panels']:
        for target in panel.get('targets', []):
            yield panel['title'], target['expr']


def grafana_expr(expr):
    """Grafana's built-in variables replaced as Grafana would before it sends the query."""
    return expr.replace('$__rate_interval', '1m').replace('$__interval', '%ds' % INTERVAL)


@pytest.fixture
def drill_lab(kube, tmp_path):
    bin_dirs = etcd_bin_dirs()
    if not bin_dirs:
        pytest.fail('no etcd binary found: run `make all`')
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 3, bin_dirs[0]).start()
    root = tmp_path / 'node'
    root.mkdir()
    now = datetime.datetime.now(datetime.timezone.utc)
    authority = pki.new_ca('kubernetes', 'ecdsa-p256', now, 3650)
    cert_source(kube, 'ca', authority.cert_pem)
    kube.create(BACKUPS, backup_body('main', cluster.endpoints, str(tmp_path / 'store'), compaction={
        'enabled': True, 'eventsThreshold': 20}))
    controller = ControllerProcess(kube.server, str(tmp_path / 'ctl'), args=[
        '--controllers', 'etcd-backup,anchor', '--anchor-root', str(root), '--anchor-node-name', 'cp1',
        '--anchor-node-ip', '127.0.0.1', '--anchor-interval', '1', '--anchor-no-cleanup']).start()
    prom = Prometheus(str(tmp_path / 'prometheus'), cluster.endpoints, controller.url)
    try:
        yield cluster, controller, prom, authority, tmp_path
    finally:
        prom.stop()
        controller.kill()
        cluster.stop()


def test_alert_drills(drill_lab, kube):
    cluster, controller, prom, authority, tmp_path = drill_lab
    started = time.monotonic()

    # --- healthy and idle -----------------------------------------------------------------------------------
    wait_for(lambda: len([t for t in prom.api('targets')['activeTargets'] if t['health'] == 'up']) == 5, 60, 0.5,
             'etcd x3, controller and prometheus scraped up')
    cluster.put_many({'/drill/%d' % i: 'x' * 64 for i in range(40)})   # deltas, then a compaction (threshold 20)
    wait_for(lambda: prom.query('etcddruid_compaction_jobs_total'), 60, 0.5, 'a compaction scraped')
    kube.merge_patch('%s/main' % BACKUPS, {'metadata': {'annotations': {'cluster.steward.io/verify-restore': 'drill'}}})
    wait_for(lambda: prom.query('steward_etcdbackup_restore_verified == 1'), 90, 0.5, 'the restore verification')
    wait_for(lambda: prom.query('steward_certificate_expiry_timestamp_seconds'), 30, 0.5, 'the certificate gauge')
    size = wait_for(lambda: prom.query('etcdbr_cluster_size'), 60, 0.5, 'etcdbr_cluster_size')
    assert [(s['metric']['etcd'], s['value'][1]) for s in size] == [(NS + '/main', '3')]
    learners = prom.query('etcdbr_is_learner')
    voters = [('etcd1', '0'), ('etcd2', '0'), ('etcd3', '0')]
    assert sorted((s['metric']['member'], s['value'][1]) for s in learners) == voters
    # the seed's controller families that this run fills have samples in Prometheus, under the seed's names
    seed = [r['family'] for r in seed_rows() if r['exporter'] == 'controller']
    scraped = {s['metric']['__name__'] for s in prom.query('{job="steward-controller"}')}
    filled = {'etcdbr_cluster_size', 'etcdbr_is_learner', 'etcdbr_restoration_duration_seconds_count',
              'etcddruid_compaction_jobs_total', 'etcddruid_compaction_job_duration_seconds_count',
              'etcddruid_compaction_num_delta_events', 'etcdbr_snapshot_latest_timestamp',
              'etcdbr_snapshot_latest_revision', 'etcdbr_snapshot_required', 'etcdbr_snapshot_duration_seconds_count'}
    assert {f for f in filled if f.replace('_count', '') in seed} == filled
    assert filled <= scraped, 'no samples for %s' % sorted(filled - scraped)

    quiet_until = time.monotonic() + DRILL_FOR + 3 * INTERVAL
    while time.monotonic() < quiet_until:
        assert prom.alerts() == [], 'an alert on a healthy, idle cluster'
        time.sleep(0.5)
    groups = prom.api('rules')['groups']
    assert len(groups) == 8 and all(r['health'] == 'ok' for g in groups for r in g['rules']), groups
    took = prom.query('sum(prometheus_rule_group_last_duration_seconds)')   # the figure of docs/observability.md
    print('rule evaluation: %d groups, %d rules, %.2f ms for all groups (last evaluation)'
          % (len(groups), sum(len(g['rules']) for g in groups), 1000 * float(took[0]['value'][1])))

    # every panel query of every dashboard parses here; every etcd/backup panel returns data
    for path in DASHBOARDS:
        for title, expr in panels(path):
            prom.query(grafana_expr(expr))   # status success, or api() fails naming the answer
    for title, expr in panels(os.path.join(ROOT, 'observability', 'grafana', 'dashboards', 'etcd.json')):
        assert wait_for(lambda: prom.query(grafana_expr(expr)), 20, 0.5, 'data for panel %r: %s' % (title, expr))

    # --- a missed backup schedule and a certificate 20 days from expiry -------------------------------------
    stale_store = str(tmp_path / 'stale-store')
    conn = EtcdConnection(endpoints=tuple(cluster.endpoints))
    day_ago = time.time() - 26 * 3600
    snapshot_to_store(conn, open_store(os.path.join(stale_store, 'missed')), now=day_ago, tmp_dir=str(tmp_path))
    unreachable = 'http://127.0.0.1:%d' % free_port()   # nothing listens: every snapshot of `missed` fails
    kube.create(BACKUPS, backup_body('missed', [unreachable], stale_store))
    now = datetime.datetime.now(datetime.timezone.utc)
    short = pki.issue(pki.Subject('kube-apiserver', usages=(pki.SERVER,)), authority, 'ecdsa-p256', now, 20)
    cert_source(kube, 'apiserver', short.cert_pem)
    shorter = pki.issue(pki.Subject('front-proxy-client'), authority, 'ecdsa-p256', now, 5)
    cert_source(kube, 'front-proxy-client', shorter.cert_pem)
    injected = time.monotonic()
    stale = wait_for(lambda: prom.firing('EtcdBackupStale'), 60, 0.5, 'EtcdBackupStale firing')
    assert [a['resource'] for a in stale] == [NS + '/missed'] and stale[0]['severity'] == 'critical'
    # its BackupReady condition is False as well (no snapshot succeeds): the not-ready alert, for it only
    not_ready = wait_for(lambda: prom.firing('EtcdBackupNotReady'), 30, 0.5, 'EtcdBackupNotReady firing')
    assert [(a['resource'], a['severity']) for a in not_ready] == [(NS + '/missed', 'critical')]
    soon = wait_for(lambda: prom.firing('KubernetesCertificateExpiringSoon'), 60, 0.5, 'certificate warning firing')
    assert [(a['path'], a['severity']) for a in soon] == [('/etc/kubernetes/pki/apiserver.crt', 'warning')]
    expiring = wait_for(lambda: prom.firing('KubernetesCertificateExpiring'), 60, 0.5, 'certificate critical firing')
    # the 7-day alert for the 5-day certificate only (not for the 20-day one), the warning for the 20-day one only
    assert [(a['path'], a['severity']) for a in expiring] == [('/etc/kubernetes/pki/front-proxy-client.crt', 'critical')]
    assert sorted((a[0], a[2]['path']) for a in prom.alerts() if a[0].startswith('KubernetesCertificateExpiring')) \
        == [('KubernetesCertificateExpiring', '/etc/kubernetes/pki/front-proxy-client.crt'),
            ('KubernetesCertificateExpiringSoon', '/etc/kubernetes/pki/apiserver.crt')]
    print('stale backup and certificate alerts firing %.1f s after the injection' % (time.monotonic() - injected))
    # the certificates' sources removed: the anchor removes the files, their expiry series go, the alerts resolve
    kube.delete('/api/v1/namespaces/kube-system/configmaps/apiserver')
    kube.delete('/api/v1/namespaces/kube-system/configmaps/front-proxy-client')
    wait_for(lambda: not [a for a in prom.alerts() if a[0].startswith('KubernetesCertificateExpiring')], 30, 0.5,
             'the certificate alerts resolved')

    # --- quorum lost, then recovered ------------------------------------------------------------------------
    cluster.kill('etcd2')
    cluster.kill('etcd3')
    killed = time.monotonic()
    pending = wait_for(lambda: [a for a in prom.api('alerts')['alerts']
                                if a['labels']['alertname'] == 'EtcdInsufficientMembers'], 30, 0.25, 'quorum alert pending')
    pending_seen = time.monotonic()
    wait_for(lambda: prom.firing('EtcdInsufficientMembers'), DRILL_FOR + 4 * INTERVAL, 0.25, 'quorum alert firing')
    fired = time.monotonic()
    # firing within its `for` plus one evaluation interval of turning pending (+ 1 s for this poll and the API)
    assert fired - pending_seen <= DRILL_FOR + INTERVAL + 1.0, (fired - pending_seen, pending)
    print('EtcdInsufficientMembers: pending %.1f s after the kill, firing %.1f s after the kill (for %ss, interval '
          '%ss)' % (pending_seen - killed, fired - killed, DRILL_FOR, INTERVAL))
    # the same fault, seen by the other two etcd alerts: the killed members' scrapes fail, the survivor has no leader
    down = wait_for(lambda: prom.firing('EtcdMembersDown'), DRILL_FOR + 4 * INTERVAL, 0.25, 'EtcdMembersDown firing')
    leaderless = wait_for(lambda: prom.firing('EtcdNoLeader'), DRILL_FOR + 4 * INTERVAL, 0.25, 'EtcdNoLeader firing')
    assert down[0]['severity'] == 'critical' and [a['instance'] for a in leaderless] == [
        lab_prometheus.host_port(cluster.members['etcd1'].client_url)], leaderless
    print('EtcdMembersDown and EtcdNoLeader firing %.1f s after the kill' % (time.monotonic() - killed))
    cluster.start_member('etcd2')
    cluster.start_member('etcd3')
    cluster.wait_healthy(['etcd1', 'etcd2', 'etcd3'], timeout=60)
    recovered = time.monotonic()
    quorum_alerts = ('EtcdInsufficientMembers', 'EtcdMembersDown', 'EtcdNoLeader')
    wait_for(lambda: not [a for a in prom.alerts() if a[0] in quorum_alerts], 30, 0.25,
             'EtcdInsufficientMembers, EtcdMembersDown and EtcdNoLeader resolved')
    print('EtcdInsufficientMembers resolved %.1f s after the members were healthy; drill %.0f s in all'
          % (time.monotonic() - recovered, time.monotonic() - started))
    shutil.rmtree(stale_store, ignore_errors=True)


def test_partition_drill(kube, tmp_path):
    """Every node partitioned (its kubelet stops renewing its Lease): the real prober scales its targets down and
    DependencyWatchdogScaledDown fires; the real machines loop in the same process sees the prober's meltdown
    marker on those targets and freezes machine replacement, and MachineFleetFrozen fires; healed, the targets come
    back, the freeze ends and both resolve. Quiet before the partition."""
    env = Env(kube, tmp_path)
    prom = None
    try:
        env.deploy()
        controller = env.start(prober_config(), extra=['--controllers', 'prober,machines',
                                                       '--machine-watchdog-check-period', '1s'])
        prom = Prometheus(str(tmp_path / 'prometheus'), [], controller.url)
        wait_for(lambda: env.status().get('lastProbeResult') == 'healthy', 60, 0.5, 'a first healthy probe')
        wait_for(lambda: prom.query('dwd_prober_scaled_down') and prom.query('steward_machines_apiserver_frozen'), 30,
                 0.5, 'the prober and the machines loop scraped')
        quiet_until = time.monotonic() + DRILL_FOR + 2 * INTERVAL
        while time.monotonic() < quiet_until:
            assert prom.alerts() == [], 'an alert before the partition'
            time.sleep(0.5)
        env.leases.partition(env.leases.names)
        cut = time.monotonic()
        fired = wait_for(lambda: prom.firing('DependencyWatchdogScaledDown'), 90, 0.5, 'the watchdog alert firing')
        assert fired[0]['severity'] == 'critical'
        print('DependencyWatchdogScaledDown firing %.1f s after every node was partitioned' % (time.monotonic() - cut))
        frozen = wait_for(lambda: prom.firing('MachineFleetFrozen'), 60, 0.5, 'the fleet-frozen alert firing')
        assert frozen[0]['severity'] == 'critical'
        # the freeze rule behind it: the watchdog's, for the prober's namespace
        assert [(s['metric']['rule'], s['metric']['scope']) for s in prom.query('steward_machines_frozen == 1')] \
            == [('DependencyWatchdogMeltdownProtection', 'namespace:' + NS_WATCHDOG)]
        print('MachineFleetFrozen firing %.1f s after every node was partitioned' % (time.monotonic() - cut))
        env.leases.heal()
        wait_for(lambda: not [a for a in prom.alerts() if a[0] in ('DependencyWatchdogScaledDown', 'MachineFleetFrozen')],
                 90, 0.5, 'the watchdog and fleet-frozen alerts resolved')
    finally:
        if prom is not None:
            prom.stop()
        env.stop()
