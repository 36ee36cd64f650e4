#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_upgrade
short_description: Upgrade this host's etcd member to a new minor or patch version, safely and resumably
version_added: 0.1.0
description:
  - Plans the rolling upgrade of the whole cluster to the version of O(target_binary) (read from the binary itself)
    or of O(target_image) (read from the image's tag), runs etcd's pre-flight checks and, when this host's member
    O(member) is due, upgrades it - move leadership away when it leads, stop, swap, start, and wait until it serves at
    the target version, has applied the leader's revision and C(HashKV) at that revision is equal on every member.
  - With O(target_binary) (a member the C(steward.cluster.etcd) role runs) the binary at O(binary) is replaced in
    place (the previous one kept as C(<binary>.pre-upgrade)). With O(target_image) (a static pod of the provisioning
    area) the image of the etcd container in O(manifest) is rewritten in place (the previous manifest kept as
    C(/etc/kubernetes/tmp/etcd.yaml.pre-upgrade)); the kubelet stops the old pod and starts the new one. Same plan,
    same order, same checks.
  - Pre-flight refuses, naming the reason (C(verdict.refusals[].reason)), a version path etcd does not support
    (a skipped minor, a downgrade, a patch below etcd's documented minimum before the next minor, auth enabled on
    3.4 to 3.5), a learner or a never-started member, a member that does not serve, member lists that differ
    between members, an active alarm, a quota (O(quota_backend_bytes)) or free disk under O(headroom_factor) times
    the database, a member certificate (O(member_certs), or a static pod's C(--cert-file) and C(--peer-cert-file))
    whose notAfter is within O(cert_window) seconds, and no verified full snapshot in O(store) newer than
    O(snapshot_max_age) seconds (it takes one first unless O(take_snapshot=false), and refuses if that fails).
    etcd 3.5.0-3.5.2 are a warning, not a refusal.
  - Resumable. The run's record (O(record_path)) names the member being touched; with the versions members report,
    a run killed at any point and started again finishes that member first and never restarts one already at the
    target. A member that fails stops the run; its previous binary (or manifest) is put back while the cluster
    version allows it, otherwise RV(rollback) names the pre-upgrade snapshot to restore and the loss window.
  - The playbook C(steward.cluster.etcd_upgrade) runs it on every member in the plan's order (followers first, the
    leader last), one host at a time.
options:
  member:
    description: Name of this host's member (the role's C(etcd_name)). Only this member is touched.
    type: str
    required: true
  target_binary:
    description:
      - Absolute path, on this host, of the etcd binary to upgrade to; its C(--version) is the target.
      - Exactly one of O(target_binary) and O(target_image).
    type: path
  target_image:
    description:
      - The etcd image to upgrade a static pod to (like C(registry.k8s.io/etcd:3.5.21-0)); its tag is the target
        version (kubeadm's C(-0) build suffix is ignored).
      - Exactly one of O(target_binary) and O(target_image).
    type: str
  manifest:
    description: The etcd static-pod manifest, as the node sees it (O(target_image)); below O(root).
    type: path
    default: /etc/kubernetes/manifests/etcd.yaml
  root:
    description: Root prefix of the node's files (O(target_image); the lab's provisioning hosts use one).
    type: path
    default: /
  binary:
    description:
      - The binary the member runs (the role's C(etcd_binary)); replaced in place by O(target_binary).
      - Required with O(target_binary).
    type: path
  member_certs:
    description:
      - The member's server and peer certificates, checked against O(cert_window) (the role's C(etcd_cert) and
        C(etcd_peer_cert)). With O(target_image) these are node paths below O(root), and the default is what the
        manifest's C(--cert-file) and C(--peer-cert-file) name.
    type: list
    elements: path
  cert_window:
    description:
      - Seconds from now that the member certificates must stay valid. One whose notAfter falls inside refuses the
        upgrade (C(cert-expiring)), naming the certificate, its notAfter and the window. 0 refuses expired ones only.
    type: int
    default: 86400
  service_manager:
    description: How the member is run (the role's C(etcd_service_manager)).
    type: str
    choices: [process, systemd]
    default: process
  service_name:
    description: systemd unit name (O(service_manager=systemd)).
    type: str
    default: etcd
  config_file:
    description:
      - The member's config file (process mode starts C(binary --config-file config_file)).
      - Required with O(target_binary).
    type: path
  pid_file:
    description: Pid file (O(service_manager=process) with O(target_binary)); required there.
    type: path
  log_file:
    description: Log file of the process (O(service_manager=process)).
    type: path
  client_url:
    description: This member's client URL (its own health is read there while it starts).
    type: str
    required: true
  data_dir:
    description:
      - The member's data dir; its disk's free space is checked against O(headroom_factor). With O(target_image)
        the default is the manifest's C(--data-dir).
    type: path
  quota_backend_bytes:
    description:
      - The member's C(quota-backend-bytes) (the role's C(etcd_quota_backend_bytes)). A static pod's
        C(--quota-backend-bytes) flag, when set, is used instead.
    type: int
    default: 2147483648
  stop_timeout:
    description: Seconds the member gets to stop before SIGKILL (process mode).
    type: int
    default: 10
  caught_up_timeout:
    description: Seconds the restarted member gets to serve and catch up (revision and C(HashKV)).
    type: float
    default: 120
  store:
    description:
      - Snapshot store (directory or C(s3://bucket/prefix)) of the pre-upgrade snapshot; the newest verified full
        snapshot there gates the run.
      - Without it the run refuses unless O(require_snapshot=false).
    type: str
    required: false
  take_snapshot:
    description: Take the pre-upgrade snapshot when the store has none newer than O(snapshot_max_age).
    type: bool
    default: true
  require_snapshot:
    description: Gate the run on a verified recent snapshot (false only with a backup of your own).
    type: bool
    default: true
  snapshot_max_age:
    description: Seconds a full snapshot counts as recent.
    type: int
    default: 3600
  headroom_factor:
    description: Quota and free disk must each be at least this many times the database size.
    type: float
    default: 2.0
  record_path:
    description:
      - The run's record (JSON), for resume. Default C(upgrade-record.json) beside O(config_file), or
        C(/etc/kubernetes/tmp/etcd-upgrade-record.json) below O(root) with O(target_image).
    type: path
  in_flight:
    description:
      - Name of the member a killed run left in flight, when it is not this host's (its record is on its own host;
        the playbook reads every host's record and passes the name). Pre-flight lets that member be down, and the plan
        finishes it first.
    type: str
  tmp_dir:
    description: Directory for the snapshot while it is verified.
    type: path
extends_documentation_fragment:
  - steward.cluster.etcd_connection
  - steward.cluster.etcd_store
  - steward.cluster.etcd_tools
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  platform:
    platforms: posix
  check_mode:
    support: full
    details: Check mode returns the plan, the target version and the verdict, and changes nothing.
  diff_mode:
    support: full
    details: The version of every member the plan changes, before and after.
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Show the plan and the verdict
  steward.cluster.etcd_upgrade:
    endpoints: ['https://10.0.0.11:2379', 'https://10.0.0.12:2379', 'https://10.0.0.13:2379']
    ca_cert: /etc/etcd/pki/ca.crt
    member: etcd1
    target_binary: /opt/etcd-v3.5.21/etcd
    binary: /usr/local/bin/etcd
    config_file: /etc/etcd/etcd.conf.yml
    pid_file: /run/etcd.pid
    client_url: https://10.0.0.11:2379
    store: /var/backups/etcd
  check_mode: true
  register: etcd_upgrade_plan

- name: Upgrade a static-pod member by its image tag (a provisioned control-plane node)
  steward.cluster.etcd_upgrade:
    endpoints: ['https://10.0.0.11:2379', 'https://10.0.0.12:2379', 'https://10.0.0.13:2379']
    ca_cert: /etc/kubernetes/pki/etcd/ca.crt
    client_cert: /etc/kubernetes/pki/apiserver-etcd-client.crt
    client_key: /etc/kubernetes/pki/apiserver-etcd-client.key
    member: cp1
    target_image: registry.k8s.io/etcd:3.5.21-0
    client_url: https://10.0.0.11:2379
    store: /var/backups/etcd

- name: Upgrade this host's member (the playbook steward.cluster.etcd_upgrade orders the hosts)
  steward.cluster.etcd_upgrade:
    endpoints: ['http://10.0.0.11:2379', 'http://10.0.0.12:2379', 'http://10.0.0.13:2379']
    member: etcd2
    target_binary: /opt/etcd-v3.5.21/etcd
    binary: /usr/local/bin/etcd
    service_manager: systemd
    config_file: /etc/etcd/etcd.conf.yml
    client_url: http://10.0.0.12:2379
    store: s3://backups/etcd
'''

RETURN = r'''
target_version:
  description: The version O(target_binary) reports, or the one O(target_image)'s tag names.
  returned: success
  type: str
  sample: 3.5.21
plan:
  description:
    - The plan of the whole cluster, C(steps) in order (C(id), C(name), C(from_version), C(to_version),
      C(was_leader), C(resume), C(actions)), C(done) (members already at the target), C(take_snapshot).
  returned: always
  type: dict
verdict:
  description: C(ok), C(refusals) (each C(reason), C(member), C(message)) and C(warnings) of pre-flight.
  returned: always
  type: dict
upgraded:
  description: Members upgraded by this run, each C(name), C(seconds) and C(caught_up) (C(revision), C(hash)).
  returned: success
  type: list
  elements: dict
snapshot:
  description: The pre-upgrade snapshot (C(name), C(key), C(revision), C(taken_at), C(verified)), or null.
  returned: success
  type: dict
rollback:
  description: On a failed member, what was done (C(action) C(previous-binary) or C(restore-snapshot), C(reason)).
  returned: failure
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import (
    ETCD_CONNECTION_SPEC,
    ETCD_STORE_SPEC,
    ETCD_TOOLS_SPEC,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.etcd_static_pod import upgrade_member

STORE_SPEC = dict(ETCD_STORE_SPEC, store={'type': 'str'})

SPEC = argspec(
    ETCD_CONNECTION_SPEC, STORE_SPEC, ETCD_TOOLS_SPEC,
    member={'type': 'str', 'required': True},
    target_binary={'type': 'path'},
    target_image={'type': 'str'},
    manifest={'type': 'path', 'default': '/etc/kubernetes/manifests/etcd.yaml'},
    root={'type': 'path', 'default': '/'},
    binary={'type': 'path'},
    member_certs={'type': 'list', 'elements': 'path'},
    cert_window={'type': 'int', 'default': 86400},
    service_manager={'type': 'str', 'choices': ['process', 'systemd'], 'default': 'process'},
    service_name={'type': 'str', 'default': 'etcd'},
    config_file={'type': 'path'},
    pid_file={'type': 'path'},
    log_file={'type': 'path'},
    client_url={'type': 'str', 'required': True},
    data_dir={'type': 'path'},
    quota_backend_bytes={'type': 'int', 'default': 2147483648},
    stop_timeout={'type': 'int', 'default': 10},
    caught_up_timeout={'type': 'float', 'default': 120},
    take_snapshot={'type': 'bool', 'default': True},
    require_snapshot={'type': 'bool', 'default': True},
    snapshot_max_age={'type': 'int', 'default': 3600},
    headroom_factor={'type': 'float', 'default': 2.0},
    record_path={'type': 'path'},
    in_flight={'type': 'str'},
    tmp_dir={'type': 'path'},
)


def main():
    module = AnsibleModule(argument_spec=SPEC, mutually_exclusive=[('target_binary', 'target_image')],
                           required_one_of=[('target_binary', 'target_image')],
                           supports_check_mode=True)
    shell.require_libraries(module, 'requests')
    shell.run(module, upgrade_member, EtcdError)


if __name__ == '__main__':
    main()
