# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node maintenance: the maintenance-controller state machine (seed 003) as a pure engine.

Entry points: `config.load_config`, `state.reconcile`, `info.describe_node`; `environment.Environment`
carries every side effect (node lists, leases, SMTP, HTTP, the gate and the commit). The Ansible modules
add `node_view.node_view` (what node_maintenance_info reports), `node_edit.plan_node_change` (what
node_maintenance writes) and one thin I/O layer, `kube_reads` (config from a file or the cluster, the
checks' Environment over the Kubernetes API). The controller adds `shuffles.shuffle_records` (the seed's
shuffle metrics of a node entering maintenance). Errors: `errors.MaintenanceError` and its subclasses.
"""
