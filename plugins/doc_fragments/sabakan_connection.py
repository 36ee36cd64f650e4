# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # How to reach sabakan and what to ask it; matches SABAKAN_CONNECTION_SPEC in module_utils/sabakan/args.py.
    DOCUMENTATION = r'''
options:
  url:
    description:
      - URL of sabakan's GraphQL API, such as C(http://sabakan.example:10080/graphql).
      - C(/graphql) is appended when the URL has no path.
    type: str
  timeout:
    description: Seconds one sabakan request may take (connect and the whole answer).
    type: float
    default: 30.0
  validate_certs:
    description: Verify the TLS certificate of an C(https) sabakan.
    type: bool
    default: true
  ca_path:
    description: CA bundle that signed sabakan's TLS certificate (PEM).
    type: path
    aliases: [ca_cert]
  variables:
    description:
      - Query variables of the C(searchMachines) query, C(having) and C(notHaving), each a sabakan
        C(MachineParams) object (C(labels), C(racks), C(roles), C(states), C(minDaysBeforeRetire)) or null.
      - A key given here replaces that key of the defaults entirely; a key left out keeps the default;
        null means no condition. The defaults depend on the module (seed 000 for cluster generation,
        seed 001 for repairs).
      - Offline machine lists (the C(machines) and C(machines_file) options, where a module has them) are
        filtered with the same variables and sabakan's matching rules.
    type: dict
'''

    # Offline machine sources, the alternatives to `url`; matches MACHINES_SOURCE_SPEC.
    MACHINES = r'''
options:
  machines:
    description:
      - Machines in the shape of sabakan's C(searchMachines) answer, for planning without sabakan.
      - Checked like a sabakan answer and filtered with O(variables) by sabakan's matching rules.
        A missing C(status.duration) is derived from C(status.timestamp) and O(now), and the other way round.
      - Exactly one of O(url), O(machines) and O(machines_file) is required.
    type: list
    elements: dict
  machines_file:
    description:
      - YAML or JSON file holding such a machine list, either as the top-level list or under C(machines),
        C(searchMachines) or C(data.searchMachines) (a saved GraphQL answer or M(steward.cluster.sabakan_machine_info) result).
    type: path
'''

    # CKE constraints; matches CONSTRAINTS_SPEC.
    CONSTRAINTS = r'''
options:
  constraints:
    description:
      - CKE constraints with CKE's keys, such as C(control-plane-count) (default 1), C(minimum-workers) (1),
        C(maximum-workers) (0, no maximum), C(maximum-repair-queue-entries) (0),
        C(wait-seconds-to-repair-rebooting) (0) and C(maximum-unreachable-nodes-for-reboot) (0).
      - Keys left out take CKE's defaults; unknown keys are an error (a typo must not silently mean 0).
      - Mutually exclusive with O(constraints_file).
    type: dict
  constraints_file:
    description: YAML or JSON file holding the constraints mapping.
    type: path
'''
