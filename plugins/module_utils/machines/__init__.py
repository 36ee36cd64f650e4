# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine lifecycle (seed 004, machine-controller-manager): Machine, MachineSet, MachineDeployment and
MachineClass in MCM's API (`machine.sapcloud.io/v1alpha1`), as a pure engine plus two drivers.

Pure (plain dicts in, typed plans out, `now` passed in):
  constants.py   API names, labels, annotations, phases, operation types and states
  codes.py       the driver error codes (MCM's gRPC numbering), the one code -> next-step table, retry delays
  config.py      timeouts and safety settings: the controller's flags, per-machine overrides
  objects.py     reading the objects (owners, phases, timestamps, selectors)
  health.py      machine health from Node conditions
  machine.py     one Machine: creation flow, health, creation/health timeouts (typed MachinePlan)
  node_template.py  a machine's node template (labels, annotations, taints) on its Node, MCM's last-applied record
  validation.py  what MCM's validation refuses, and replicas the schema should have refused
  deletion.py    one deleting Machine: typed deletion steps, drain decisions (drain.py: the drain plan)
  machineset.py  replicas, victim order, status counts, overshoot freeze
  deployment.py / rollout.py   MachineDeployment: new/old sets, rolling and recreate, proportional scaling,
                 pause, rollback, progress deadline, revision history, status
  safety.py      fleet freeze, meltdown limit, API-server and watchdog freezes, orphan collection
  reconcile.py   one pass over everything: the world in, a plan of typed actions out
Drivers (I/O): driver.py (the interface and request/response types), aws.py (boto3), sabakan_driver.py.
Shells' helpers: apply.py (the one order of writes, calls and actions), ansible_view.py and waiting.py (the modules).
"""
