# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's `Etcd` resource (seed 004, `druid.gardener.cloud/v1alpha1`) on the etcd engine: what the `etcd`
controller loop decides, as pure functions over plain data (`now` passed in).

  errors.py      the area's one exception tree (DruidError; EtcdSpecError for bad input)
  spec.py        an `Etcd` object -> a frozen EtcdSpec with druid's defaults; the spec-reconcile gate (ETCD-13/14)
  components.py  the desired objects druid manages (ETCD-12): StatefulSet, bootstrap ConfigMap, Services, Leases,
                 PodDisruptionBudget (ETCD-20), ServiceAccount/Role/RoleBinding; names, labels, owner references
  status.py      members from Leases and pods (ETCD-16), clusterSize (ETCD-17), conditions, replica counts
  plan.py        druid's decision table (ETCD-18) as one typed action per pass, with the safety gates beyond druid
  peer_tls.py    peer TLS before a scale-up (ETCD-42 step 2): whom a scale-up waits for, a member's peer URL update
  client_tls.py  an Etcd's client TLS Secrets -> a connection to its members (the controller's one mapping)
Nothing here imports AnsibleModule or kopf; the loop (controller/steward_controller/etcd_druid) applies what it says.
"""
