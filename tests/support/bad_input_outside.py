"""An outside sweep (issue 19 §6: "an outside sweep with cases not listed here checks it"): wrong inputs written
as a hostile new user would, kept apart from the suite's own cases (tests/support/bad_input_cases.py) so that the
suite does not grade its own homework. `python tests/bad_input_sweep.py --outside` runs them with the same runner
and outcome classes; the cases that found something were then added to the suite.

Each module's base is the suite's (a valid call pointing at the scratch world); a case changes a few options. The
endpoints here lie rather than fail: `{liar_url}` answers every request 200 with JSON of the wrong shape, the
FIFO `{root}/fifo` blocks a reader forever, `{root}/bomb.yml` is a billion-laughs YAML document.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional

from support.bad_input import Case, World
from support.bad_input_cases import CASES, CKE_NODES, CKE_TEMPLATE, HOST, HOST2, HOST3
from support.tls import ca_pem

# Billion laughs: nine levels of ten references each; safe_load shares the references, anything that walks the
# result (JSON, a deep copy, a validator) sees 10^9 leaves.
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + ''.join(
    '%s: &%s [%s]\n' % (b, b, ','.join(['*%s' % a] * 10)) for a, b in zip('abcdefgh', 'bcdefghi'))


def _prepare(here: World) -> None:
    root = here.values['root']
    if not os.path.exists(os.path.join(root, 'fifo')):
        os.mkfifo(os.path.join(root, 'fifo'))
    with open(os.path.join(root, 'bomb.yml'), 'w') as handle:
        handle.write(BOMB)


def prepared(check: Optional[Callable[[World], Callable[[], Optional[str]]]] = None):
    """A Case.setup that makes the FIFO and the YAML bomb (and runs `check`'s setup, if any)."""
    def setup(here: World) -> Callable[[], Optional[str]]:
        _prepare(here)
        return check(here) if check else (lambda: None)
    return setup


def case(case_id: str, args: Dict, **kw) -> Case:
    return Case(case_id, args, setup=prepared(kw.pop('check', None)), **kw)


# A CA certificate with the key of another CA: certificates signed with it would not chain to the cluster's CA.
MISMATCHED_AUTHORITY = {'ca.crt': ca_pem()['ca.crt'], 'ca.key': ca_pem()['ca.key']}
KUBE_LIAR = {'kubeconfig': '{kubeconfig_liar}', 'request_timeout': 2}
DUP_SERIALS = [{'spec': {'serial': 's1', 'ipv4': ['10.0.0.%d' % n], 'rack': 0, 'indexInRack': n, 'role': 'cs',
                         'labels': [], 'registerDate': '2025-01-01T00:00:00Z', 'retireDate': '2030-01-01T00:00:00Z',
                         'bmc': {'bmcType': 'IPMI-2.0'}},
                'status': {'state': 'HEALTHY', 'timestamp': '2025-06-01T00:00:00Z', 'duration': 10}} for n in (1, 2, 3)]
DUP_IPS = [dict(m, spec=dict(m['spec'], serial='s%d' % n, ipv4=['10.0.0.1'])) for n, m in enumerate(DUP_SERIALS)]

OUTSIDE: Dict[str, List[Case]] = {
    # --- provisioning -------------------------------------------------------------------------------------------
    'apiserver_lb': [
        case('lb_port-zero', {'lb_port': 0}),
        case('control_plane-host-name-not-ip', {'control_plane': [{'name': 'cp1', 'address': 'cp1.example'}]}),
        case('control_plane-duplicate-address', {'control_plane': [{'name': 'cp1', 'address': '10.0.0.11'},
                                                                   {'name': 'cp2', 'address': '10.0.0.11'}]}),
        case('reload_timeout-nan', {'reload_timeout': float('nan')}),
        case('root-with-dotdot', {'root': '{root}/../escaped'}),
    ],
    'cert_info': [
        case('renew_before_days-huge', {'renew_before_days': 10 ** 12}),
        case('now-month-13', {'now': '2026-13-45T00:00:00Z'}),
        case('root-is-a-fifo', {'root': '{root}/fifo'}),
    ],
    'cluster_authority': [
        case('ca_days-huge', {'ca_days': 10 ** 9}),
        case('root-is-a-file', {'root': '{file}'}),
    ],
    'cluster_genesis': [
        case('node_name-uppercase-unicode', {'node_name': 'CP-ü'}),
        case('pod_cidr-overlaps-service_cidr', {'pod_cidr': '10.96.0.0/12', 'service_cidr': '10.96.0.0/16'}),
        case('kubernetes_version-latest', {'kubernetes_version': 'latest'}),
        case('cluster_name-newline', {'cluster_name': 'lab\nevil: true'}),
        case('control_plane-a-mapping', {'control_plane': {'name': 'cp1', 'address': '10.0.0.11'}}),
        case('cert_days-negative', {'cert_days': -30}),
        case('image_repository-spaces', {'image_repository': 'registry example/k8s'}),
    ],
    'join_script': [
        case('authority-key-of-another-ca', {'authority': MISMATCHED_AUTHORITY}),
        case('dest-is-a-fifo', {'dest': '{root}/fifo'}),
        case('node_name-dotdot', {'node_name': '..'}),
    ],
    'node_join': [
        case('role-master', {'role': 'master'}),
        case('address-unspecified', {'address': '0.0.0.0'}),
        case('authority-key-of-another-ca', {'authority': MISMATCHED_AUTHORITY}),
        case('etcd_timeout-string', {'etcd_timeout': 'soon'}),
    ],
    'node_remove': [
        case('member_id-zero', {'member_id': '0'}),
        case('peer_url-not-a-url', {'peer_url': 'cp1:2380'}),
        case('protected_namespaces-invalid', {'protected_namespaces': ['Kube System']}),
        case('wait_timeout-huge', {'wait_timeout': 1e300}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    'node_teardown': [
        case('wait_timeout-nan', {'wait_timeout': float('nan')}),
        case('root-relative-dot', {'root': '.'}),
        case('etcd_endpoints-not-urls', {'etcd_endpoints': ['not a url']}),
    ],
    'node_labels': [
        case('label-value-none', {'labels': {'zone': None}}),
        case('label-value-unicode', {'labels': {'zone': 'zürich'}}),
        case('label-key-restricted-prefix-empty', {'labels': {'/zone': 'a'}}),
        case('labels-empty-key', {'labels': {'': 'a'}}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    # --- machines -------------------------------------------------------------------------------------------------
    'machine_deployment': [
        case('replicas-a-billion', {'replicas': 10 ** 9}),
        case('max_surge-percent-text', {'max_surge': 'lots%'}),
        case('max_unavailable-negative', {'max_unavailable': -1}),
        case('max_surge-and-unavailable-zero', {'max_surge': 0, 'max_unavailable': 0}),
        case('drain_timeout-negative', {'drain_timeout': '-5m'}),
        case('namespace-uppercase', {'namespace': 'Shoot--X'}),
        case('class_name-slash', {'class_name': 'a/b'}),
        case('node_taints-bad-effect', {'node_taints': [{'key': 'k', 'effect': 'Sometimes'}]}),
        case('min_ready_seconds-negative', {'min_ready_seconds': -1}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    'machine_info': [
        case('name-nul', {'name': 'pool\x00a'}),
        case('label_selector-double-comma', {'label_selector': 'a=b,,c=d'}),
        case('kubeconfig-is-a-fifo', {'kubeconfig': '{root}/fifo'}, limit=1.0),
        case('kubeconfig-yaml-bomb', {'kubeconfig': '{root}/bomb.yml'}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    # --- watchdog -------------------------------------------------------------------------------------------------
    'watchdog_probe': [
        case('config_file-yaml-bomb', {'config': None, 'config_file': '{root}/bomb.yml'}),
        case('config_file-is-a-fifo', {'config': None, 'config_file': '{root}/fifo'}, limit=1.0),
        case('probeTimeout-negative', {'config': dict(CASES['watchdog_probe'].base['config'], probeTimeout='-1s')}),
        case('grace-duration-huge', {'config': dict(CASES['watchdog_probe'].base['config'],
                                                    kcmNodeMonitorGraceDuration='100000000h')}),
        case('level-negative', {'config': dict(CASES['watchdog_probe'].base['config'], dependentResourceInfos=[
            {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'scaleUp': {'level': -1},
             'scaleDown': {'level': 0}}])}),
        case('owner-newline', {'owner': 'steward\nwatchdog'}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}',
             may_succeed=True),
    ],
    # --- the older areas ------------------------------------------------------------------------------------------
    'etcd_cluster_info': [
        case('endpoints-unicode-host', {'endpoints': ['http://étcd:2379']}),
        case('endpoints-liar', {'endpoints': ['{liar_url}']}, limit=1.0, may_succeed=True, names=('endpoints',),
             endpoint='{liar_url}'),
    ],
    'etcd_config': [
        case('path-is-a-fifo', {'path': '{root}/fifo'}),
        case('config-key-with-newline', {'config': {'name': 'etcd1', 'data-dir': '{root}/data', 'x\ny': 1}}),
    ],
    'etcd_data_dir': [
        case('path-usr-local', {'path': '/usr/local'}, check_mode=True),
    ],
    'etcd_defrag': [
        case('min_fragmentation_ratio-nan', {'min_fragmentation_ratio': float('nan')}),
        case('endpoints-liar', {'endpoints': ['{liar_url}']}, limit=1.0, names=('endpoints',), endpoint='{liar_url}'),
    ],
    'etcd_upgrade': [
        case('member-300-chars', {'member': 'e' * 300}),
        case('endpoints-liar', {'endpoints': ['{liar_url}']}, limit=1.0, names=('endpoints',), endpoint='{liar_url}'),
    ],
    'etcd_member': [
        case('peer_urls-empty-list', {'peer_urls': []}),
        case('name-300-chars', {'name': 'e' * 300}),
        case('endpoints-liar', {'endpoints': ['{liar_url}']}, limit=1.0, names=('endpoints',), endpoint='{liar_url}'),
    ],
    'etcd_member_facts': [
        case('peer_url-ftp', {'peer_url': 'ftp://127.0.0.1:2380'}),
        case('pid_file-is-a-fifo', {'pid_file': '{root}/fifo'}, limit=1.0),
    ],
    'etcd_process': [
        case('pid_file-is-a-fifo', {'pid_file': '{root}/fifo'}, limit=1.0),
        case('stop_timeout-huge', {'stop_timeout': 10 ** 12}),
        case('binary-is-a-directory-started', {'state': 'started', 'binary': '{dir}', 'config_file': '{file}'}),
    ],
    'etcd_recovery_plan': [
        case('raft_index-negative', {'hosts': [dict(HOST, raft_index=-5), HOST2, HOST3]}),
        case('raft_index-huge-float', {'hosts': [dict(HOST, raft_index=1e30), HOST2, HOST3]}),
        case('cluster_id-newline', {'hosts': [dict(HOST, cluster_id='c1\nc2'), HOST2, HOST3]}),
        case('name-empty', {'hosts': [dict(HOST, name=''), HOST2, HOST3]}),
        case('members-with-a-string', {'hosts': [dict(HOST, members=['etcd1']), HOST2, HOST3]}),
    ],
    'etcd_restore': [
        case('initial_advertise_peer_urls-not-urls', {'initial_advertise_peer_urls': ['nowhere']}),
        case('snapshot-name-traversal', {'snapshot': '../../etc/passwd'}),
        case('snapshot_file-is-a-fifo', {'store': None, 'snapshot_file': '{root}/fifo'}, limit=1.0),
    ],
    'etcd_snapshot': [
        case('store-file-url-relative', {'store': 'file://relative/store'}),
        case('store-ftp', {'store': 'ftp://backups/etcd'}),
    ],
    'etcd_snapshot_gc': [
        case('policy-lowercase', {'policy': 'limitbased'}),
    ],
    'etcd_snapshot_info': [
        case('sse_customer_key-too-short', {'store': 's3://b/p', 'encryption_mode': 'SSE-C', 'sse_customer_key': 'short'}),
        case('store-s3-without-bucket', {'store': 's3:///prefix'}),
    ],
    'etcd_backup_verify': [
        case('snapshot-name-traversal', {'snapshot': '../../../etc/shadow'}),
        case('tmp_dir-is-a-fifo', {'tmp_dir': '{root}/fifo'}),
    ],
    'node_maintenance': [
        case('name-uppercase', {'name': 'Node-1'}),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    'node_maintenance_info': [
        case('config_file-yaml-bomb', {'config_file': '{root}/bomb.yml'}),
        case('config_file-is-a-fifo', {'config_file': '{root}/fifo'}, limit=1.0),
        case('kubeconfig-liar', dict(KUBE_LIAR), limit=2.0, names=('kubeconfig',), endpoint='{kubeconfig_liar}'),
    ],
    'sabakan_cluster': [
        case('machines-duplicate-serials', {'url': None, 'machines': DUP_SERIALS}),
        case('machines-duplicate-ips', {'url': None, 'machines': DUP_IPS}),
        case('machines_file-is-a-fifo', {'url': None, 'machines_file': '{root}/fifo'}, limit=1.0),
        case('template_file-yaml-bomb', {'template': None, 'template_file': '{root}/bomb.yml'}),
        case('template-nodes-a-string', {'template': dict(CKE_TEMPLATE, nodes='all')}),
        case('constraints-float', {'constraints': {'control-plane-count': 2.5}}),
        case('url-liar', {'url': '{liar_url}'}, limit=1.0, names=('url',), endpoint='{liar_url}'),
    ],
    'sabakan_machine_info': [
        case('variables-unknown-key', {'variables': {'having': {'colour': ['red']}}}),
        case('url-with-userinfo-and-fragment', {'url': 'http://user:pw@127.0.0.1:9/graphql#x'}),
        case('url-liar', {'url': '{liar_url}'}, limit=1.0, names=('url',), endpoint='{liar_url}'),
    ],
    'sabakan_repair': [
        case('machines-duplicate-serials', {'url': None, 'machines': DUP_SERIALS}),
        case('queue_file-is-a-fifo', {'queue_file': '{root}/fifo'}, limit=1.0),
        case('constraints_file-yaml-bomb', {'constraints_file': '{root}/bomb.yml'}),
    ],
}

assert not set(OUTSIDE) - set(CASES), sorted(set(OUTSIDE) - set(CASES))
assert CKE_NODES  # the suite's template nodes: the bases above build on them

# The cases that found something on main at 85a17d3 (107 cases: 7 tracebacks, 8 hangs past twice the timeout,
# 4 harmful changes, 4 silent successes, 13 refusals that did not name the option): the suite runs them too
# (tests/unit/plugins/modules/test_modules_bad_input.py), so `make test` catches their return.
FOUND = {
    'cluster_genesis': ('image_repository-spaces',),
    'etcd_cluster_info': ('endpoints-unicode-host',),
    'etcd_config': ('path-is-a-fifo', 'config-key-with-newline'),
    'etcd_member_facts': ('pid_file-is-a-fifo',),
    'etcd_process': ('pid_file-is-a-fifo',),
    'etcd_recovery_plan': ('cluster_id-newline',),
    'etcd_restore': ('initial_advertise_peer_urls-not-urls',),
    'join_script': ('dest-is-a-fifo',),
    'machine_deployment': ('max_surge-percent-text', 'max_unavailable-negative', 'max_surge-and-unavailable-zero',
                           'kubeconfig-liar'),
    'machine_info': ('name-nul', 'label_selector-double-comma', 'kubeconfig-liar'),
    'node_join': ('address-unspecified',),
    'node_labels': ('kubeconfig-liar',),
    'node_maintenance': ('kubeconfig-liar',),
    'node_maintenance_info': ('config_file-yaml-bomb', 'config_file-is-a-fifo', 'kubeconfig-liar'),
    'node_remove': ('member_id-zero', 'peer_url-not-a-url', 'protected_namespaces-invalid', 'kubeconfig-liar'),
    'node_teardown': ('etcd_endpoints-not-urls',),
    'sabakan_cluster': ('machines-duplicate-serials', 'machines_file-is-a-fifo'),
    'sabakan_machine_info': ('variables-unknown-key', 'url-with-userinfo-and-fragment'),
    'sabakan_repair': ('machines-duplicate-serials', 'queue_file-is-a-fifo', 'constraints_file-yaml-bomb'),
    'watchdog_probe': ('grace-duration-huge', 'kubeconfig-liar'),
}


def found_cases(name: str) -> List[Case]:
    """The outside cases of `name` that found something: suite cases from now on."""
    return [c for c in OUTSIDE.get(name, []) if c.case_id in FOUND.get(name, ())]


assert all(len(found_cases(name)) == len(ids) for name, ids in FOUND.items()), 'FOUND names a case that does not exist'
