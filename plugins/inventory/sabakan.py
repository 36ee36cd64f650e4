# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
name: sabakan
short_description: Kubernetes nodes from a CKE cluster file or generated live from sabakan
version_added: 0.1.0
description:
  - Hosts are the nodes of a CKE cluster, named by their address.
  - With only O(cluster_file), the nodes come from that file, as written by M(steward.cluster.sabakan_cluster).
  - With a machine source (O(url) or O(machines_file)) and a template, the cluster is generated live from
    sabakan (read-only, nothing is written). When O(cluster_file) is given too, it is the current
    cluster and the hosts are the cluster the next M(steward.cluster.sabakan_cluster) run would write.
  - Groups C(control_plane) and C(workers), one group C(role_<role>) per machine role and one group
    C(rack_<n>) per rack.
  - Host variables C(ansible_host) (the address), C(ansible_user) (the node user), C(sabakan_labels),
    C(sabakan_annotations), C(sabakan_taints), C(sabakan_serial), C(sabakan_rack) (an integer),
    C(sabakan_role) and C(sabakan_control_plane).
  - Variable values are data from sabakan and the cluster file and are marked unsafe, so they are never templated.
  - The configuration file name must end with C(sabakan.yml) or C(sabakan.yaml). Relative paths in it
    are relative to its directory.
options:
  plugin:
    description: The name of this plugin; marks the file as a configuration of it.
    required: true
    type: str
    choices: [steward.cluster.sabakan]
  cluster_file:
    description: A CKE cluster file (C(cluster.yml)).
    type: path
  url:
    description: URL of sabakan's GraphQL API, for live generation.
    type: str
  machines_file:
    description:
      - YAML or JSON file holding a sabakan machine list (C(searchMachines) shape), for live generation without sabakan.
      - Mutually exclusive with O(url).
    type: path
  timeout:
    description: Seconds one sabakan request may take.
    type: float
    default: 30.0
  validate_certs:
    description: Verify the TLS certificate of an C(https) sabakan.
    type: bool
    default: true
  ca_path:
    description: CA bundle that signed sabakan's TLS certificate (PEM).
    type: path
  variables:
    description:
      - Query variables C(having) and C(notHaving) laid over seed 000's defaults
        (C(notHaving) roles boot and states RETIRED).
    type: dict
  template:
    description: The cluster template (CKE C(cluster.yml) with node templates), for live generation.
    type: dict
  template_file:
    description: YAML or JSON file holding the cluster template, for live generation.
    type: path
  constraints:
    description: CKE constraints (C(control-plane-count), C(minimum-workers), ...); CKE's defaults when unset.
    type: dict
  constraints_file:
    description: YAML or JSON file holding the constraints.
    type: path
  wait_retired_seconds:
    description: Seconds a worker must have been RETIRED before it is removed, when O(cluster_file) is updated live.
    type: float
    default: 300
extends_documentation_fragment:
  - constructed
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
# cluster.sabakan.yml: the nodes of a generated cluster file
plugin: steward.cluster.sabakan
cluster_file: /etc/cke/cluster.yml

---
# live.sabakan.yml: generate from sabakan without writing anything, with extra groups
plugin: steward.cluster.sabakan
url: http://sabakan.example:10080/graphql
template_file: /etc/cke/template.yml
constraints:
  control-plane-count: 3
  minimum-workers: 6
keyed_groups:
  - key: sabakan_labels['sabakan.cke.cybozu.com/product']
    prefix: product
groups:
  retiring: "'cke.cybozu.com/state' in (sabakan_taints | map(attribute='key'))"
compose:
  bmc_serial: sabakan_serial
'''

import os

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import GENERATOR_VARIABLES
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import check_wait_seconds
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import FileError, SabakanError, SourceError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integrate import plan_checked_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.source import (
    load_constraints_input,
    load_current_cluster,
    load_template,
    machines_from,
)

KNOWN_ERRORS = (SabakanError,)   # the area's base: every error below says what and where


def _plain(value):
    """Plain Python containers (inventory options may carry Ansible's tagged types)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def node_vars(node):
    """Host variables of one cluster node."""
    labels = dict(node.get('labels') or {})
    annotations = dict(node.get('annotations') or {})
    rack = labels.get('cke.cybozu.com/rack')
    try:
        rack = int(rack) if rack is not None else None
    except ValueError:
        pass
    return {
        'ansible_host': node['address'],
        'ansible_user': node.get('user') or None,
        'sabakan_labels': labels,
        'sabakan_annotations': annotations,
        'sabakan_taints': [dict(t) for t in node.get('taints') or []],
        'sabakan_serial': annotations.get('cke.cybozu.com/serial'),
        'sabakan_rack': rack,
        'sabakan_role': labels.get('cke.cybozu.com/role'),
        'sabakan_control_plane': bool(node.get('control_plane')),
    }


class InventoryModule(BaseInventoryPlugin, Constructable):

    NAME = 'steward.cluster.sabakan'

    def verify_file(self, path):
        if super(InventoryModule, self).verify_file(path):
            return path.endswith(('sabakan.yml', 'sabakan.yaml'))
        return False

    def _path(self, name, base):
        value = self.get_option(name)
        if value is None:
            return None
        value = os.path.expanduser(str(value))
        return value if os.path.isabs(value) else os.path.join(base, value)

    def load_cluster(self, base):
        """The cluster whose nodes become hosts (raises one of KNOWN_ERRORS)."""
        cluster_file = self._path('cluster_file', base)
        url = self.get_option('url')
        machines_file = self._path('machines_file', base)
        template, template_file = self.get_option('template'), self._path('template_file', base)
        current = None
        if cluster_file is not None:
            current = load_current_cluster(cluster_file)
        if url is None and machines_file is None:
            if cluster_file is None:
                raise SourceError('', 'required', 'set cluster_file (hosts from a cluster file), or url or machines_file '
                                  'with template or template_file (hosts generated live from sabakan)')
            if template is not None or template_file is not None:
                raise SourceError('', 'requires', 'template and template_file need url or machines_file (live generation)')
            if current is None:
                raise FileError('cluster file %s' % cluster_file, 'exists', 'does not exist')
            return current
        if template is None and template_file is None:
            raise SourceError('', 'requires', 'live generation from %s needs template or template_file'
                              % ('url' if url else 'machines_file'))
        template = load_template(_plain(template), template_file)
        constraints = load_constraints_input(_plain(self.get_option('constraints')),
                                             self._path('constraints_file', base))
        machines = machines_from(url=url, machines_file=machines_file, variables=_plain(self.get_option('variables')),
                                 defaults=GENERATOR_VARIABLES, timeout=self.get_option('timeout'),
                                 validate_certs=self.get_option('validate_certs'),
                                 ca_path=self._path('ca_path', base))
        wait = check_wait_seconds(self.get_option('wait_retired_seconds'))   # the module's check: NaN, inf refused
        _plan, cluster = plan_checked_cluster(current, template, constraints, machines, wait_retired_seconds=wait)
        return cluster

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            cluster = self.load_cluster(os.path.dirname(os.path.abspath(path)))
        except KNOWN_ERRORS as exc:
            raise AnsibleParserError('%s: %s: %s' % (path, type(exc).__name__, exc))
        self.populate(cluster)

    def populate(self, cluster):
        strict = self.get_option('strict')
        self.inventory.add_group('control_plane')
        self.inventory.add_group('workers')
        for node in cluster.get('nodes') or []:
            host = node['address']
            hostvars = node_vars(node)
            self.inventory.add_host(host)
            for key, value in hostvars.items():
                if value is not None:
                    # Labels and annotations come from sabakan and the cluster file: data, never templates.
                    self.inventory.set_variable(host, key, wrap_var(value))
            groups = ['control_plane' if hostvars['sabakan_control_plane'] else 'workers']
            if hostvars['sabakan_role']:
                groups.append(self._sanitize_group_name('role_%s' % hostvars['sabakan_role']))
            if hostvars['sabakan_rack'] is not None:
                groups.append(self._sanitize_group_name('rack_%s' % hostvars['sabakan_rack']))
            for group in groups:
                self.inventory.add_group(group)
                self.inventory.add_child(group, host)
            self._set_composite_vars(self.get_option('compose'), hostvars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option('groups'), hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option('keyed_groups'), hostvars, host, strict=strict)
