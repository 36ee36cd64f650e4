# -*- coding: utf-8 -*-
"""Benchmark: a druid `Etcd`'s lifecycle on the lab's parts, side by side in one run: create -> Ready for 1 and for 3
members, a member lost with its disk -> AllMembersReady again, all three lost with every PVC -> serving again from
the store (through a QuorumLossRecoveryTask, as tests/integration/test_druid_quorum_loss_journey.py does), and the
controller's memory and pass time with 100 `Etcd` objects.

The lab's parts, every piece real: the API emulator with the shipped CRDs and the pod runtime on a random loopback /24
(tests/support/druid_lab.py; no lab lock), the controller's `etcd` and `etcd-tasks` loops as a process, S3 over HTTP
(moto, tests/support/s3_fidelity.py) with a druid backup Secret, etcd 3.5 and `steward-etcd-member` as processes.
The controller runs with the member-loss journey's flags (`--etcd-status-sync-period 1s
--etcd-member-unknown-threshold 5s --etcd-member-notready-threshold 3s`; druid's defaults are 15s, 1m and 5m) and the
`Etcd` with the journeys' `heartbeatDuration: 2s` (druid's default 10s): the figures say what the machinery takes,
not how long druid's defaults wait before they act; `--druid-defaults` runs the lifecycle with druid's defaults.

- create: the `Etcd` posted -> `status.ready` and -> every member Ready (`ready`, `clusterSize`, `readyReplicas` and
  the AllMembersReady condition). Floor: the etcd container's readiness probe (initialDelaySeconds 15, period 5,
  as druid renders it), which the lab's pod runtime honours.
- member loss: member 1's etcd killed (SIGKILL to its process group), its PVC and its pod deleted -> a new member ID
  for etcd-main-1 in etcd's member list, then every member Ready again. The same readiness floor applies to the
  recreated pod.
- total loss: a full snapshot taken (`GET /snapshot/full` on a member's program), all three etcd containers frozen
  (SIGSTOP: they hang for good; killed, as a kubelet would, once the loop has scaled the StatefulSet to 0) and every
  PVC deleted -> `Ready` False (detection), then an operator's QuorumLossRecoveryTask -> every member Ready with no
  recovery in progress and every key written before the snapshot on every member.
- scale: N `Etcd` objects in an API emulator with no pod runtime (no pod ever starts: the members stay Unknown),
  the controller's `etcd` loop as a process: its RSS before and after, VmHWM, the first sweep (every object passed
  once: a status written), settled (every object's components created, one per pass as the loop acts:
  `observedGeneration` written) and its CPU share in steady state (the Events and log lines it wrote meanwhile say
  whether it was steady); then the loop's pass (read, status, plan,
  write status) timed in this process over every object (EtcdDruidLoop.run_pass, the code the controller's pass
  thread runs; the emulator serves from this process too).

    python bench/druid_lifecycle.py [--runs 3] [--scenarios one,three,scale] [--objects 100] [--druid-defaults]
Writes bench/results/druid_lifecycle.json.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import logging
import os
import signal
import statistics
import subprocess
import tempfile
import time
import types
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import boto3  # noqa: E402
import requests  # noqa: E402

from summary_file import write_summary  # noqa: E402
from support.druid_lab import DruidLab, _client  # noqa: E402
from support.s3_fidelity import FidelityMotoServer  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path  # noqa: E402
from lab.env.controller import ControllerProcess, install_crds  # noqa: E402
from lab.kube.api import KubeServer  # noqa: E402
from lab.pods import images  # noqa: E402

FLAGS = ['--controllers', 'etcd,etcd-tasks', '--etcd-status-sync-period', '1s', '--etcd-member-unknown-threshold',
         '5s', '--etcd-member-notready-threshold', '3s']
HEARTBEAT = '2s'


@dataclasses.dataclass(frozen=True)
class Profile:
    """The controller's flags and the Etcd's member heartbeat a run uses; `slack`: seconds added to the waits for
    what the thresholds bound (druid's defaults wait minutes before a member is NotReady)."""
    name: str
    flags: List[str]
    heartbeat: Optional[str]
    slack: float = 0.0


JOURNEY = Profile('journey', FLAGS, HEARTBEAT)
DRUID_DEFAULTS = Profile('druid-defaults', ['--controllers', 'etcd,etcd-tasks'], None, slack=480.0)
SCALE_SYNC = 5.0      # the scale run's --etcd-status-sync-period (seconds)
BUCKET = 'druid-lifecycle'
RECOVERY = 'cluster.steward.io/quorum-loss-recovery'


def _etcdctl(*args: str, endpoint: str) -> str:
    etcdctl = os.path.join(os.path.dirname(images.etcd_binary('3.5')), 'etcdctl')
    return subprocess.run([etcdctl, '--endpoints', endpoint, '--command-timeout', '10s'] + list(args), check=True,
                          capture_output=True, text=True, timeout=30).stdout


def _member_ids(endpoint: str) -> Dict[str, str]:
    try:
        members = json.loads(_etcdctl('member', 'list', '-w', 'json', endpoint=endpoint)).get('members') or []
    except (subprocess.SubprocessError, ValueError):
        return {}
    return {m.get('name', ''): '%x' % m['ID'] for m in members}


def _etcd_group(pod: Dict[str, Any]) -> int:
    """The process group of the pod's etcd container (the wrapper and etcd)."""
    status = next(s for s in pod['status']['containerStatuses'] if s['name'] == 'etcd')
    return int(status['containerID'].split('://', 1)[1])


def _signal(groups: List[int], signum: int) -> None:
    for group in groups:
        try:
            os.killpg(group, signum)
        except ProcessLookupError:
            pass


def _condition(status: Dict[str, Any], kind: str) -> Any:
    return next((c for c in status.get('conditions') or [] if c['type'] == kind), {}).get('status')


def _post_etcd(lab: DruidLab, replicas: int, profile: Profile) -> None:
    etcd = {'quota': '2Gi', 'heartbeatDuration': profile.heartbeat} if profile.heartbeat else {'quota': '2Gi'}
    answer = lab.session.post(lab.kube.url + api_path('druid.gardener.cloud/v1alpha1', 'etcds', lab.ns), json={
        'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
        'metadata': {'name': lab.name, 'namespace': lab.ns},
        'spec': {'replicas': replicas, 'labels': {'app': lab.name},
                 'etcd': etcd,
                 'backup': {'fullSnapshotSchedule': '0 */24 * * *', 'deltaSnapshotPeriod': '60s',
                            'store': {'provider': 'aws', 'container': BUCKET, 'prefix': 'demo--' + lab.name,
                                      'secretRef': {'name': 'etcd-backup-aws'}}}}})
    assert answer.status_code == 201, answer.text


def _backup_secret(lab: DruidLab, s3_url: str) -> None:
    """The druid backup Secret as a druid user has it (etcd-backup-restore's keys)."""
    secret = {'accessKeyID': 'testing', 'secretAccessKey': 'testing', 'region': 'us-east-1', 'endpoint': s3_url,
              's3ForcePathStyle': 'true'}
    answer = lab.session.post(lab.kube.url + '/api/v1/namespaces/%s/secrets' % lab.ns, json={
        'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'etcd-backup-aws', 'namespace': lab.ns},
        'type': 'Opaque', 'data': {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}})
    assert answer.status_code == 201, answer.text


def _create(lab: DruidLab, replicas: int, profile: Profile) -> Dict[str, float]:
    """Post the Etcd; seconds to status.ready and to every member Ready."""
    began = time.monotonic()
    _post_etcd(lab, replicas, profile)
    lab.wait(lambda: lab.status().get('ready'), 180 + profile.slack, 'status.ready')
    ready = time.monotonic() - began
    lab.wait(lambda: lab.all_ready(replicas), 180 + profile.slack, 'every member Ready')
    return {'to_ready_s': round(ready, 1), 'to_all_members_ready_s': round(time.monotonic() - began, 1)}


def _endpoint(pod: Dict[str, Any]) -> str:
    return 'http://%s:2379' % pod['status']['podIP']


def _put_keys(endpoint: str, keys: List[str]) -> None:
    for key in keys:
        _etcdctl('put', key, 'v-' + key, endpoint=endpoint)


def _keys_everywhere(lab: DruidLab, keys: List[str]) -> List[str]:
    """The members (pod names) that miss one of `keys` (serializable reads, each member alone)."""
    missing = []
    for pod in lab.pods():
        got = _etcdctl('get', 'k', '--prefix', '--keys-only', '--consistency=s', endpoint=_endpoint(pod)).split()
        if not set(keys) <= set(got):
            missing.append(pod['metadata']['name'])
    return missing


def _pvcs(lab: DruidLab) -> List[str]:
    return [c['metadata']['name'] for c in lab.session.get(
        lab.kube.url + '/api/v1/namespaces/%s/persistentvolumeclaims' % lab.ns).json()['items']]


def _delete(lab: DruidLab, path: str) -> None:
    answer = lab.session.delete(lab.kube.url + path)
    assert answer.status_code in (200, 202), answer.text


def _member_loss(lab: DruidLab, profile: Profile) -> Dict[str, Any]:
    """Member 1 lost with its disk: etcd killed, its PVC and pod deleted -> a new member, then AllMembersReady."""
    pods = {p['metadata']['name']: p for p in lab.pods()}
    survivor = _endpoint(pods[lab.name + '-0'])
    before = _member_ids(survivor)
    lost = lab.name + '-1'
    began = time.monotonic()
    _signal([_etcd_group(pods[lost])], signal.SIGKILL)
    for claim in [c for c in _pvcs(lab) if c.endswith(lost)]:
        _delete(lab, '/api/v1/namespaces/%s/persistentvolumeclaims/%s' % (lab.ns, claim))
    _delete(lab, '/api/v1/namespaces/%s/pods/%s' % (lab.ns, lost))
    noticed = lab.wait(lambda: not lab.all_ready(3) and time.monotonic(), 60 + profile.slack,
                       'the loss seen in the status', every=0.2)

    def replaced():
        ids = _member_ids(survivor)
        return len(ids) == 3 and ids.get(lost) not in (None, before.get(lost)) and ids
    after = lab.wait(replaced, 180 + profile.slack, 'a new member for %s' % lost)
    new_member = time.monotonic() - began
    lab.wait(lambda: lab.all_ready(3), 180 + profile.slack, 'every member Ready after the member loss')
    return {'seen_in_status_s': round(noticed - began, 1), 'to_new_member_s': round(new_member, 1),
            'to_all_members_ready_s': round(time.monotonic() - began, 1),
            'others_kept_ids': all(after[n] == before[n] for n in before if n != lost)}


def _total_loss(lab: DruidLab, profile: Profile) -> Dict[str, Any]:
    """All three frozen and every PVC deleted -> Ready False, then a QuorumLossRecoveryTask -> serving again."""
    pods = {p['metadata']['name']: p for p in lab.pods()}
    keys = ['k%02d' % i for i in range(20, 30)]
    _put_keys(_endpoint(pods[lab.name + '-0']), keys)
    saved = requests.get('http://%s:8080/snapshot/full' % pods[lab.name + '-0']['status']['podIP'], timeout=60)
    assert saved.status_code == 200, saved.text
    stopped_before = len(lab.events('QuorumLossMembersStopped'))
    recovered_before = len(lab.events('QuorumLossRecovered'))
    frozen = [_etcd_group(p) for p in pods.values()]
    try:
        began = time.monotonic()
        _signal(frozen, signal.SIGSTOP)
        for claim in _pvcs(lab):
            _delete(lab, '/api/v1/namespaces/%s/persistentvolumeclaims/%s' % (lab.ns, claim))
        lab.wait(lambda: _condition(lab.status(), 'Ready') == 'False', 60 + profile.slack, 'Ready=False', every=0.2)
        detected = time.monotonic() - began
        tasks = api_path('druid.gardener.cloud/v1alpha1', 'etcdoperatortasks', lab.ns)
        answer = lab.session.post(lab.kube.url + tasks, json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'EtcdOperatorTask',
            'metadata': {'name': 'recover', 'namespace': lab.ns},
            'spec': {'type': 'QuorumLossRecoveryTask', 'ownerEtcdRefrence': {'name': lab.name, 'namespace': lab.ns}}})
        assert answer.status_code == 201, answer.text
        asked = time.monotonic()
        lab.wait(lambda: len(lab.events('QuorumLossMembersStopped')) > stopped_before, 120 + profile.slack,
                 'members stopped',
                 every=0.2)
        _signal(frozen, signal.SIGKILL)   # what a kubelet does to a container that does not stop
        frozen = []
        lab.wait(lambda: len(lab.events('QuorumLossRecovered')) > recovered_before, 240 + profile.slack,
                 'QuorumLossRecovered')
        lab.wait(lambda: lab.all_ready(3) and RECOVERY not in (
            lab.session.get(lab.kube.url + lab.etcd_path).json()['metadata'].get('annotations') or {}), 120,
            'every member Ready after the recovery')
        done = time.monotonic()
        task = (lab.session.get(lab.kube.url + tasks + '/recover').json().get('status') or {}).get('state')
        return {'to_ready_false_s': round(detected, 1), 'task_to_all_members_ready_s': round(done - asked, 1),
                'to_all_members_ready_s': round(done - began, 1), 'task_state': task,
                'members_missing_keys': _keys_everywhere(lab, ['k%02d' % i for i in range(30)])}
    finally:
        _signal(frozen, signal.SIGKILL)


def lifecycle_run(replicas: int, s3_url: str, profile: Profile) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix='bench-druid-lifecycle-') as work:
        lab = DruidLab(work, controller_args=profile.flags).start()
        try:
            _backup_secret(lab, s3_url)
            out: Dict[str, Any] = {'replicas': replicas, 'profile': profile.name,
                                   'create': _create(lab, replicas, profile)}
            if replicas == 3:
                lab.wait(lambda: _condition(lab.status(), 'BackupReady') == 'True', 120, 'BackupReady')
                _put_keys(_endpoint(lab.pods()[0]), ['k%02d' % i for i in range(20)])
                out['member_loss'] = _member_loss(lab, profile)
                out['total_loss'] = _total_loss(lab, profile)
            return out
        finally:
            lab.stop()
            # each run starts from an empty store
            boto3.resource('s3', endpoint_url=s3_url, region_name='us-east-1').Bucket(BUCKET).objects.all().delete()


# ---- scale: N Etcd objects, no pods ----------------------------------------------------------------------------------
def _proc_status(pid: int) -> Dict[str, int]:
    """VmRSS and VmHWM (kB) of a process."""
    out = {}
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            key, _sep, value = line.partition(':')
            if key in ('VmRSS', 'VmHWM'):
                out[key] = int(value.split()[0])
    return out


def _cpu_seconds(pid: int) -> float:
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _events(session: requests.Session, url: str) -> int:
    """Events in the namespace (the loop posts one for every action, and one per changed outcome that acts not)."""
    return len(session.get(url + '/api/v1/namespaces/demo/events').json()['items'])


def _etcd_object(name: str) -> Dict[str, Any]:
    return {'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': name, 'namespace': 'demo'},
            'spec': {'replicas': 3, 'labels': {'app': name},
                     'etcd': {'quota': '2Gi'}, 'backup': {'fullSnapshotSchedule': '0 */24 * * *'}}}


def scale_run(count: int, steady_window: float, sweeps: int) -> Dict[str, Any]:
    from steward_controller.core.metrics import Health, Metrics
    from steward_controller.core.runtime import Runtime
    from steward_controller.etcd_druid import DruidOptions
    from steward_controller.etcd_druid.loop import EtcdDruidLoop

    session = requests.Session()
    # pod_runtime=True with no runtime started: the status mover leaves StatefulSets alone and no pod ever exists
    kube = KubeServer(status_delay=None, pod_runtime=True).start()
    controller = None
    try:
        install_crds(_client(kube.url))
        with tempfile.TemporaryDirectory(prefix='bench-druid-scale-') as work:
            controller = ControllerProcess(kube, work + '/controller', args=[
                '--controllers', 'etcd', '--etcd-status-sync-period', '%gs' % SCALE_SYNC]).start()
            pid = controller.proc.pid
            end = time.monotonic() + 60
            while controller.metric('steward_controller_leader') != 1.0:
                assert time.monotonic() < end and controller.proc.poll() is None, controller.log()[-3000:]
                time.sleep(0.5)
            time.sleep(2.0)
            idle = _proc_status(pid)
            etcds = api_path('druid.gardener.cloud/v1alpha1', 'etcds', 'demo')
            began = time.monotonic()
            for i in range(count):
                answer = session.post(kube.url + etcds, json=_etcd_object('etcd-%03d' % i))
                assert answer.status_code == 201, answer.text
            posted = time.monotonic() - began

            def passed(settled):
                items = session.get(kube.url + etcds).json()['items']
                return len(items) == count and all(
                    (o.get('status') or {}).get('observedGeneration') == o['metadata'].get('generation') if settled
                    else (o.get('status') or {}).get('lastOperation') for o in items)
            end = time.monotonic() + 600
            for settled in (False, True):
                while not passed(settled):
                    assert time.monotonic() < end and controller.proc.poll() is None, controller.log()[-3000:]
                    time.sleep(0.5)
                if not settled:
                    first_sweep = time.monotonic() - began
            settled_s = time.monotonic() - began
            time.sleep(SCALE_SYNC)
            cpu0, t0, events0, log0 = _cpu_seconds(pid), time.monotonic(), _events(session, kube.url), \
                os.path.getsize(controller.log_path)
            time.sleep(steady_window)
            cpu_share = (_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            with open(controller.log_path, errors='replace') as f:
                f.seek(log0)
                steady_log = [line for line in f.read().splitlines() if line.strip()]
            steady_events = _events(session, kube.url) - events0
            loaded = _proc_status(pid)
            controller.stop()
            controller = None

            # the same pass, timed here over every object (the controller stopped, so only this one writes)
            client = _client(kube.url)
            runtime = Runtime(settings=types.SimpleNamespace(namespace='steward-system'), client=client,
                              metrics=Metrics(), health=Health())
            loop = EtcdDruidLoop(runtime, DruidOptions(status_sync_period=SCALE_SYNC))
            keys = [('demo', 'etcd-%03d' % i) for i in range(count)]
            sweep_s, per_pass = [], []
            for _sweep in range(sweeps):
                t_sweep = time.perf_counter()
                for key in keys:
                    t_pass = time.perf_counter()
                    loop.run_pass(key)
                    per_pass.append(time.perf_counter() - t_pass)
                sweep_s.append(time.perf_counter() - t_sweep)
            per_pass.sort()
            return {
                'objects': count, 'post_s': round(posted, 1),
                'controller_rss_idle_mib': round(idle['VmRSS'] / 1024, 1),
                'controller_rss_mib': round(loaded['VmRSS'] / 1024, 1),
                'controller_vmhwm_mib': round(loaded['VmHWM'] / 1024, 1),
                'first_sweep_s': round(first_sweep, 1), 'settled_s': round(settled_s, 1),
                'steady_cpu_share': round(cpu_share, 3),
                'steady_window_s': steady_window, 'sync_period_s': SCALE_SYNC,
                'steady_events': steady_events, 'steady_log_lines': len(steady_log),
                'steady_log_sample': steady_log[:3],
                'in_process_sweep_s': [round(x, 2) for x in sweep_s],
                'in_process_pass_median_ms': round(statistics.median(per_pass) * 1000, 1),
                'in_process_pass_p90_ms': round(per_pass[int(len(per_pass) * 0.9)] * 1000, 1),
            }
    finally:
        if controller is not None:
            controller.stop()
        kube.stop()


def _median(runs: List[Dict[str, Any]], *path: str) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = (value or {}).get(key)
        if value is not None:
            values.append(value)
    return round(statistics.median(values), 1) if values else float('nan')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--runs', type=int, default=3, help='runs of each lifecycle scenario (medians reported)')
    parser.add_argument('--scenarios', default='one,three,scale', help='comma-separated: one, three, scale')
    parser.add_argument('--druid-defaults', action='store_true',
                        help="the lifecycle runs with druid's default flags and heartbeat (15s, 1m, 5m; 10s) "
                             "instead of the member-loss journey's (1s, 5s, 3s; 2s)")
    parser.add_argument('--objects', type=int, default=100, help='Etcd objects in the scale run')
    parser.add_argument('--steady-window', type=float, default=30.0, help='seconds the steady CPU share is read over')
    parser.add_argument('--sweeps', type=int, default=3, help='in-process sweeps over every object')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'druid_lifecycle.json'))
    args = _env.parse_args(parser, 'druid_lifecycle', {'runs': 1, 'scenarios': 'one,scale', 'objects': 5,
                                                       'steady_window': 2.0, 'sweeps': 1})
    _env.announce(args)
    if images.etcd_binary('3.5') is None:
        raise SystemExit('needs the etcd 3.5 binaries (make all)')
    scenarios = args.scenarios.split(',')
    profile = DRUID_DEFAULTS if args.druid_defaults else JOURNEY
    summary: Dict[str, Any] = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'profile': profile.name,
                               'flags': profile.flags, 'heartbeat': profile.heartbeat,
                               'runs': {}, 'medians': {}}
    if 'one' in scenarios or 'three' in scenarios:
        for key, value in (('AWS_ACCESS_KEY_ID', 'testing'), ('AWS_SECRET_ACCESS_KEY', 'testing'),
                           ('AWS_DEFAULT_REGION', 'us-east-1')):
            os.environ.setdefault(key, value)
        logging.getLogger('werkzeug').setLevel(logging.ERROR)   # moto's request log
        s3 = FidelityMotoServer('127.0.0.1', 0).start()
        s3_url = 'http://127.0.0.1:%d' % s3.port
        boto3.client('s3', endpoint_url=s3_url, region_name='us-east-1').create_bucket(Bucket=BUCKET)
        try:
            for name, replicas in (('one', 1), ('three', 3)):
                if name not in scenarios:
                    continue
                runs = summary['runs'][name] = []
                for _run in range(args.runs):
                    runs.append(lifecycle_run(replicas, s3_url, profile))
                    print('%-5s %s' % (name, json.dumps(runs[-1])), flush=True)
        finally:
            s3.stop()
    medians = summary['medians']
    for name, runs in summary['runs'].items():
        medians[name + '_create_to_ready_s'] = _median(runs, 'create', 'to_ready_s')
        medians[name + '_create_to_all_members_ready_s'] = _median(runs, 'create', 'to_all_members_ready_s')
    if 'three' in summary['runs']:
        runs = summary['runs']['three']
        medians['member_loss_to_all_members_ready_s'] = _median(runs, 'member_loss', 'to_all_members_ready_s')
        medians['total_loss_to_all_members_ready_s'] = _median(runs, 'total_loss', 'to_all_members_ready_s')
    if 'scale' in scenarios:
        summary['scale'] = scale_run(args.objects, args.steady_window, args.sweeps)
        print('scale %s' % json.dumps(summary['scale']), flush=True)
    summary['load_average'] = os.getloadavg()
    print('medians %s' % json.dumps(medians), flush=True)
    write_summary(args.output, summary)


if __name__ == '__main__':
    main()
